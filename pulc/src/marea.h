/*
 * marea.h — the message area's tables: ports, message descriptors and fragments.
 *
 * Everything lives in the area memfd (area.h) at offsets, guarded by the area lock, a
 * process-shared robust mutex.  Every object carries its own state so that a process killed
 * while holding the lock can be repaired by rebuilding every list from those states
 * (pulc_area_repair): a message belongs to its port's queue while QUEUED and is ordered by
 * its arrival number; a fragment belongs to the message it names and is ordered by its
 * payload offset; everything else is free.
 *
 * Message life: the first fragment of a message (or a local sender) takes a descriptor and
 * queues it at its port's end (end queuing); later fragments are appended to the sender's
 * open message (destination prediction: a port remembers the message it filled last).  The
 * reader sees a message as soon as its first bytes arrived, claims it (accept callback) and
 * takes fragments out while the rest streams in, so a message larger than all fragments
 * still passes.  A local message above PSP_LOCAL_DIRECT is DIRECT: no fragments, the reader
 * copies it once from the sender's memory and hands the descriptor back (DIRECT_DONE).
 */
#ifndef PSPORT_PULC_MAREA_H
#define PSPORT_PULC_MAREA_H

#include <stdint.h>

#include "area.h"

#define PULC_NONE       0xffffffffu
#define PULC_XHDR_MAX   256 /* largest extra header of a message */
#define PULC_INLINE_MAX 64  /* messages up to this size live in their descriptor */

enum pulc_port_state { PULC_PORT_FREE = 0, PULC_PORT_OPEN = 1 };

/* Port kinds: the protocol a port accepts (equal to the PSP_PORT_* values of pulc.h). */
enum pulc_port_kind { PULC_KIND_D = 1, PULC_KIND_S = 2, PULC_KIND_M = 3 };

struct pulc_port {
    uint32_t state;    /* enum pulc_port_state */
    uint32_t kind;     /* enum pulc_port_kind */
    int32_t owner_pid; /* the process that opened it */
    uint32_t generation;
    uint32_t qhead, qtail; /* queued messages in arrival order */
    uint32_t qlen;
    uint32_t last_open; /* destination prediction: the message filled last, or PULC_NONE */
    uint32_t event;     /* futex word: bumped when a message arrives or grows, or an error */
    uint32_t sleepers;  /* processes asleep on event */
    int32_t error;      /* asynchronous error for the owner (negative errno), 0 none */
    uint32_t error_msg_id;
    uint32_t error_src;                    /* port id that reported it */
    uint32_t tx_open;                      /* the owner is posting a remote message's fragments: */
    uint32_t tx_open_dest, tx_open_msg_id; /* to whom, which (psid aborts it if we die) */
    uint32_t abort_src, abort_msg_id;      /* an abort notice that came before its message */
    uint64_t msgs_in, bytes_in, msgs_out, bytes_out;
    uint32_t rings;             /* local rings to this port (lring.h), or PULC_NONE */
    uint32_t rings_gen;         /* atomic: bumped when that list changes */
} __attribute__((aligned(64))); /* a port's owner writes it: not on another port's lines */

/* A remote message a dead process left half sent: psid tells the receiver to drop it. */
struct pulc_abort {
    uint32_t dest;     /* receiver's port id */
    uint16_t src_port; /* the dead process's port */
    uint32_t msg_id;
};

enum pulc_msg_state {
    PULC_MSG_FREE = 0,
    PULC_MSG_QUEUED = 1,      /* in its port's queue (possibly still filling) */
    PULC_MSG_DIRECT_DONE = 2, /* direct: the reader is done; the sender frees it */
};

#define PULC_MSG_CLAIMED 0x01u /* a receive of the port's owner took it */
#define PULC_MSG_DIRECT  0x02u /* local, copied from the sender with process_vm_readv */
#define PULC_MSG_ABORTED 0x04u /* will never complete (sender restarted or died) */
#define PULC_MSG_RAW     0x08u /* a rawdata registration (owner direct_pid, buffer direct_addr) */
#define PULC_MSG_SHARED  0x10u /* direct: the reader published its buffer; both copy chunks */
#define PULC_MSG_INLINE  0x20u /* the whole payload is in inl[] (no fragments) */
#define PULC_MSG_HIDDEN  0x40u /* local, sent with a ring ticket not yet read: receives skip it */
#define PULC_MSG_RING    0x80u /* came through local ring `ring`, not claimed yet (lring.h) */

struct pulc_msg {
    uint32_t state; /* enum pulc_msg_state */
    uint32_t port;  /* port index */
    uint32_t port_gen;
    uint32_t next, prev; /* queue links, or next free */
    uint32_t src;        /* sender's port id (node << 16 | port number) */
    uint32_t msg_id;     /* the sender's number for it */
    uint32_t total;      /* payload bytes as sent */
    uint32_t received;   /* payload bytes arrived (a prefix) */
    uint32_t taken;      /* payload bytes the reader consumed */
    uint32_t frag_head, frag_tail;
    uint16_t xlen; /* extra header bytes (in xhdr) */
    uint8_t proto; /* the protocol that carried it (proto.h) */
    uint8_t flags; /* PULC_MSG_* */
    uint32_t done; /* direct: futex word, 0 pending, 1 copied, else 2 (error in direct_err) */
    int32_t direct_pid;
    int32_t direct_err; /* negative errno of the reader's copy */
    uint64_t direct_addr;
    /* direct, SHARED: reader and writer both copy chunks (one copy per byte, on two cores)
     * until copied == recv_len */
    int32_t recv_pid;
    uint32_t recv_len;
    uint64_t recv_addr;
    uint32_t chunk_next; /* atomic: next chunk to take */
    uint32_t copied;     /* atomic: bytes copied by both */
    int32_t copy_err;    /* first failure of either side (negative errno) */
    uint32_t chunk;      /* bytes per chunk */
    uint64_t seq;        /* arrival number (area->seq) */
    uint64_t rx_tag;     /* the host queue frame that queued it (area->rx_count), or ~0 */
    uint32_t ring;       /* PULC_MSG_RING / HIDDEN: the local ring it belongs to */
    uint32_t pad;
    uint8_t inl[PULC_INLINE_MAX]; /* the payload of an INLINE message */
    uint8_t xhdr[PULC_XHDR_MAX];
};

struct pulc_frag {
    uint32_t msg;  /* owning message, PULC_NONE when free */
    uint32_t next; /* next fragment of the message, or of the free list */
    uint32_t off;  /* payload offset of its first byte within the message */
    uint32_t len;  /* bytes it holds */
    uint32_t pad;
    uint64_t rx_tag; /* the host queue frame that filled it (area->rx_count), or ~0 */
};

static inline struct pulc_port *pulc_port_at(struct pulc_area *a, uint32_t i)
{
    return (struct pulc_port *)((uint8_t *)a + a->off_ports) + i;
}

static inline struct pulc_msg *pulc_msg_at(struct pulc_area *a, uint32_t i)
{
    return (struct pulc_msg *)((uint8_t *)a + a->off_msgs) + i;
}

static inline struct pulc_frag *pulc_frag_at(struct pulc_area *a, uint32_t i)
{
    return (struct pulc_frag *)((uint8_t *)a + a->off_frags) + i;
}

static inline uint8_t *pulc_frag_data(struct pulc_area *a, uint32_t i)
{
    return (uint8_t *)a + a->off_frag_data + (uint64_t)i * a->cfg.frag_size;
}

/* Fragments a message of total bytes, arriving with len bytes first, needs for them. */
static inline uint32_t pulc_frags_needed(const struct pulc_area *a, uint32_t total, uint32_t len)
{
    if (len == total && total <= PULC_INLINE_MAX)
        return 0;
    return (len + a->cfg.frag_size - 1) / a->cfg.frag_size;
}

/* Bytes of an area with cfg's tables (header included, page aligned). */
size_t pulc_area_bytes(const struct pulc_area_cfg *cfg);

/* Bytes of the header and tables alone (where the fragments' data begins). */
size_t pulc_area_tables_bytes(const struct pulc_area_cfg *cfg);

/* Lay out the tables of cfg in a zeroed area and put everything on the free lists. */
void pulc_area_format_tables(struct pulc_area *a, const struct pulc_area_cfg *cfg);

/*
 * Take the area lock.  A holder that died leaves it "owner dead": the area is rebuilt
 * (pulc_area_repair), counted and logged, and the lock made consistent.  Returns 0 or a
 * negative errno when the lock cannot be taken.
 */
int pulc_area_lock(struct pulc_area *a);

/* Release the area lock. */
void pulc_area_unlock(struct pulc_area *a);

/*
 * Rebuild every list of the area from the objects' own states (caller holds the area lock):
 * free lists, port queues in arrival order, fragment chains in offset order, received and
 * taken counts of each message.  If an object carries the tag of the host queue frame not
 * yet released (area->rx_count), that frame was applied: rx_head_applied is set so the next
 * drain releases it instead of applying it twice.  Returns the number of objects that
 * changed list.
 */
unsigned pulc_area_repair(struct pulc_area *a);

/* A free message descriptor taken off the free list (zeroed, state FREE), or PULC_NONE. */
uint32_t pulc_msg_alloc(struct pulc_area *a);

/* Free message m and every fragment it holds; it must not be queued. */
void pulc_msg_free(struct pulc_area *a, uint32_t m);

/* Queue message m (filled in, state FREE) at the end of port p and count it. */
void pulc_msg_enqueue(struct pulc_area *a, uint32_t p, uint32_t m);

/* Take message m out of its port's queue (its state is left to the caller). */
void pulc_msg_unlink(struct pulc_area *a, uint32_t m);

/*
 * Append len payload bytes at the message's current end (offset m->received) in fragments
 * taken from the free list, tagged rx_tag (~0 for local data); a whole message of up to
 * PULC_INLINE_MAX bytes (m->total set) goes into the descriptor instead.  Returns 0, or -ENOBUFS
 * when not enough fragments are free (nothing appended).
 */
int pulc_msg_append(struct pulc_area *a, uint32_t m, const void *data, uint32_t len,
                    uint64_t rx_tag);

/*
 * Read up to max arrived bytes of message m from the reader's position (m->taken) to dst
 * (NULL: discard them), freeing the fragments emptied.  Returns the bytes read.
 */
uint32_t pulc_msg_read(struct pulc_area *a, uint32_t m, void *dst, uint32_t max);

/*
 * Bump port p's event and wake processes asleep on it.  Call after the area lock is
 * released or while holding it (the futex call does not touch the lock).
 */
void pulc_port_wake(struct pulc_area *a, uint32_t p);

/*
 * How pulc_port_wake() reaches sleepers in this process's areas: NULL (the default) wakes the
 * futex on the port's event (psid provider); with the kernel provider sleepers wait in the
 * device (PSK_IOC_WAIT) and fn wakes them there (psk_dev.c sets it).
 */
void pulc_area_set_waker(void (*fn)(struct pulc_area *a));

/*
 * Close port p (caller holds the area lock): queued messages are freed, direct ones handed
 * back to their senders with -ECONNRESET; the port becomes FREE with a new generation.
 */
void pulc_port_close_locked(struct pulc_area *a, uint32_t p);

/*
 * Release what dead process pid held (psid, on its disconnect): its ports are closed and
 * direct messages it sent are freed.  Remote messages it left half sent are listed in
 * aborts (at most max; *naborts set) for the caller to notify.  Returns the ports closed.
 */
unsigned pulc_area_reclaim(struct pulc_area *a, int32_t pid, struct pulc_abort *aborts,
                           unsigned max, unsigned *naborts);

/*
 * The rawdata registration `index` of port number port with nonce (caller holds the area
 * lock), or NULL when there is none: unregistered, port closed, or out of range.
 */
struct pulc_msg *pulc_raw_reg(struct pulc_area *a, uint32_t port, uint32_t index, uint32_t nonce);

/* Messages and fragments in use (not on the free lists). */
void pulc_area_usage(struct pulc_area *a, uint32_t *msgs_used, uint32_t *frags_used);

#endif
