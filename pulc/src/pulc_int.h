/*
 * pulc_int.h — libpulc's process-side state shared by its modules: the open ports, the
 * requests in flight and the progress engine (port.c), used by the port-S/M streams and
 * rawdata.
 */
#ifndef PSPORT_PULC_INT_H
#define PSPORT_PULC_INT_H

#include <stddef.h>
#include <stdint.h>

#include "hal.h"
#include "marea.h"
#include "proto.h"
#include "pulc.h"

/* Progress runs the NIC at every call within PULC_NIC_BUSY_NS of inter-node traffic, else
 * at most every PULC_NIC_QUIET_NS (port.c). */
#define PULC_NIC_BUSY_NS  5000000ull
#define PULC_NIC_QUIET_NS 20000ull
/* A remote post within PULC_AT_POST_BURST_NS of one that sent at once belongs to the same burst
 * and waits for the next pass (port.c, pulc_send_queue_remote): posts of a burst come a
 * microsecond or so apart, a send after a pause without progress comes much later. */
#define PULC_AT_POST_BURST_NS 20000ull

/* Request states (p_state); 0 is complete so a zeroed request counts as complete. */
enum pulc_rq_state {
    PULC_RQ_DONE = 0,
    PULC_RQ_SEND_REMOTE, /* fragments still to post to the NIC */
    PULC_RQ_SEND_LOCAL,  /* local: waiting for message descriptors or fragments */
    PULC_RQ_SEND_DIRECT, /* local, large: the reader copies from our buffer */
    PULC_RQ_RECV_POSTED, /* waiting for a message accept() takes */
    PULC_RQ_RECV_MATCHED /* taking the message's data as it arrives */
};

/* A local destination of a sending port and the ring to it (PULC_NONE: the queue, for good). */
struct pulc_lpeer {
    PSP_PortId dest;
    uint32_t ring;
    uint64_t tail_seen; /* the ring's reader position as last read */
    uint32_t activity;  /* the port's activity at the last send here: none since = streaming */
};

struct PSP_Port {
    uint32_t idx; /* port number = index in the area's port table */
    uint32_t kind;
    uint32_t gen;
    uint32_t next_msg_id;
    uint32_t seen_event;            /* the port's event when its queue was last examined */
    PSP_Request *rq_head, *rq_tail; /* posted receives in the order posted */
    struct PSP_Port *next;          /* list of this process's open ports */
    void *stream;                   /* port-S / port-M reader state (stream.c) */
    /* local rings (lring.h, local.c) */
    struct pulc_lpeer *peers; /* sender: the rings to local destinations */
    uint32_t npeers, cap_peers, last_peer;
    uint32_t *rx_rings; /* receiver: the rings to this port, as last listed */
    uint32_t nrx_rings, cap_rx_rings;
    uint32_t rx_rings_gen; /* the list's rings_gen then */
    uint32_t activity;     /* ring messages taken without the lock (PSP_WaitPort sees them) */
    uint32_t moved_mark;   /* event + activity at the last progress turn (its return value) */
};

struct pulc_proc {
    struct pulc_hal *h;
    struct pulc_node node;
    PSP_Port *ports;
    PSP_Request *rsend_head, *rsend_tail; /* remote sends not fully posted, in order */
    PSP_Request *lsend_head, *lsend_tail; /* local sends not complete, in order */
    uint32_t local_direct;                /* PSP_LOCAL_DIRECT */
    uint32_t ring_max;                    /* PSP_LOCAL_RING_MAX within what the rings take */
    int light_fence;                      /* ring sends fence lightly (wakefence.h) */
    int tx_at_post;                       /* PSP_TX_AT_POST */
    uint64_t at_post_ns; /* when a remote post last ran the firmware; 0 after a progress pass */
    uint64_t remote_ns;  /* last time we sent to or received from another node */
    uint64_t nic_ns;     /* last time progress ran the NIC */
    uint32_t calls;      /* progress calls (the clock is read every 32nd while quiet) */
    int nic_busy;        /* inter-node traffic lately: run the NIC at every call */
    unsigned raw_regs;   /* rawdata registrations of this process */
};

/* Request lists (a port's receives, the process's sends) and completion. */
static inline void rq_append(PSP_Request **head, PSP_Request **tail, PSP_Request *r)
{
    r->p_next = NULL;
    r->p_prev = *tail;
    if (*tail)
        (*tail)->p_next = r;
    else
        *head = r;
    *tail = r;
}

static inline void rq_remove(PSP_Request **head, PSP_Request **tail, PSP_Request *r)
{
    if (r->p_prev)
        r->p_prev->p_next = r->p_next;
    else
        *head = r->p_next;
    if (r->p_next)
        r->p_next->p_prev = r->p_prev;
    else
        *tail = r->p_prev;
    r->p_next = r->p_prev = NULL;
}

static inline void rq_complete(PSP_Request *r, int error)
{
    r->error = error;
    __atomic_store_n(&r->p_state, PULC_RQ_DONE, __ATOMIC_RELEASE);
}

/*
 * Zero every field of req.  Field by field, not memset: GCC makes a 128-byte memset (or a
 * compound literal) `rep stos`, whose start-up cost was a tenth of the local receive path in
 * osu_mbw_mr on an AMD EPYC.  The assertions stop the build when a field is added.
 */
static inline void rq_clear(PSP_Request *req)
{
    _Static_assert(sizeof(PSP_Request) == 128 && offsetof(PSP_Request, p_arg) == 120,
                   "PSP_Request changed: clear its new fields in rq_clear");
    req->error = 0;
    req->src = 0;
    req->len = req->copied = 0;
    req->xlen = req->p_kind = 0;
    req->p_state = 0;
    req->p_next = req->p_prev = NULL;
    req->p_port = NULL;
    req->p_sbuf = NULL;
    req->p_rbuf = NULL;
    req->p_xhdr = NULL;
    req->p_xbuf = NULL;
    req->p_buflen = req->p_xmax = req->p_off = req->p_msg_id = req->p_msg = 0;
    req->p_dest = 0;
    req->p_accept = NULL;
    req->p_place = NULL;
    req->p_arg = NULL;
}

/* A receive request into buf (len bytes) and xbuf (xmax bytes), not yet in any list. */
static inline void recv_init(PSP_Request *req, PSP_Port *port, void *xbuf, uint16_t xmax, void *buf,
                             uint32_t len)
{
    rq_clear(req);
    req->p_port = port;
    req->p_rbuf = buf;
    req->p_buflen = len;
    req->p_xbuf = xbuf;
    req->p_xmax = xmax;
    req->p_msg = PULC_NONE;
    req->p_state = PULC_RQ_RECV_POSTED;
}

/*
 * Offer a message (info) to the posted receive r of port: the request that takes it — r, or
 * for a standing receive the one its place callback gave (initialised here), or
 * PSP_PLACE_TAKEN when the callback used it in place (info->data set) — or NULL when the
 * receive passes it by.  Queue (port.c) and local rings (local.c) alike.
 */
static inline PSP_Request *rq_offer(PSP_Request *r, PSP_Port *port, const PSP_MsgInfo *info)
{
    if (r->p_place) {
        void *buf = NULL;
        uint32_t len = 0;
        PSP_Request *to = r->p_place(info, r->p_arg, &buf, &len);
        if (to == PSP_PLACE_TAKEN && !info->data)
            return NULL; /* not allowed without the data at hand: it stays queued */
        if (to && to != PSP_PLACE_TAKEN)
            recv_init(to, port, NULL, 0, buf, buf ? len : 0);
        return to;
    }
    return !r->p_accept || r->p_accept(info, r->p_arg) ? r : NULL;
}

/* The process's state, attaching first (PSP_Init) when needed: NULL with *err set on failure. */
struct pulc_proc *pulc_proc(int *err);

/* Progress once: firmware pass (adaptive), drain, pending sends, errors, posted receives. */
int pulc_progress(struct pulc_proc *P);

/*
 * Wait until done(arg) is true, at most timeout_ms (-1: no limit), co-scheduling: progress
 * while spinning PSP_SPIN_US, then progress and yield for PSP_YIELD_US, then sleep on the
 * port's event (port NULL: short sleeps).  Returns 0, -ETIMEDOUT or a negative errno.
 */
int pulc_wait(struct pulc_proc *P, PSP_Port *port, int (*done)(void *), void *arg, int timeout_ms);

/*
 * Start sending a message of protocol proto (PULC_PROTO_D/S/M) from port to dest: the
 * common path of PSP_ISend and the stream writes.  req is filled and queued; returns 0 or an
 * error found at once.
 */
int pulc_send_start(struct pulc_proc *P, PSP_Port *port, unsigned proto, PSP_PortId dest,
                    const void *xheader, uint16_t xlen, const void *buf, uint32_t len,
                    PSP_Request *req);

/*
 * Queue a remote send whose request is filled in (fragments posted as the send ring allows,
 * in order after earlier remote sends).  Used by PSP_ISend and rawdata.
 */
void pulc_send_queue_remote(struct pulc_proc *P, PSP_Request *req);

/*
 * Local rings, the process's side (local.c; lring.h says why and how order is kept).
 *
 * pulc_local_send: send r (local, state SEND_LOCAL) now: 2 passed whole through a ring, 1
 * queued (DIRECT or fragments; with a ticket when the pair has a ring), 0 no room yet, or a
 * negative errno.  Takes the area lock only when needed and then leaves it to the caller
 * (*locked set).  try_local is port.c's queue path (caller holds the lock).
 */
int pulc_local_send(struct pulc_proc *P, PSP_Request *r, int *locked,
                    int (*try_local)(struct pulc_proc *, PSP_Request *, uint32_t ring,
                                     uint64_t *tail_seen));

/* Send a port-D message to local port dest through the ring at once, without a request: 1
 * sent, 0 not (no ring, or no room: the caller sends it the usual way).  The caller checked
 * that it fits a ring entry (P->ring_max) and that no earlier local send waits. */
int pulc_local_send_now(struct pulc_proc *P, PSP_Port *port, PSP_PortId dest, uint32_t msg_id,
                        const void *xhdr, uint16_t xlen, const void *buf, uint32_t len);

/* Receiver: offer ring messages of port to its first posted receive without the lock.
 * Returns 1 when something is left that needs the lock (pulc_local_move_locked). */
int pulc_local_take(struct pulc_proc *P, PSP_Port *port);

/* Receiver, area lock held: list the port's rings again and move what its rings hold into
 * its queue; rings drained whose sender closed are closed.  0, or -ENOBUFS (try again). */
int pulc_local_move_locked(struct pulc_proc *P, PSP_Port *port);

/* Receiver: 1 when a ring of port holds something or its ring list changed (do not sleep). */
int pulc_local_ready(struct pulc_proc *P, PSP_Port *port);

/* Whether a ring to port port_idx holds an entry, read from the shared area alone (the ring
 * list as it is now, without the area lock): for a sleeper whose other threads may be in
 * the library meanwhile (PSP_SleepPort). */
int pulc_local_ready_shared(struct pulc_area *a, uint32_t port_idx);

/* The port closes: forget its peers and rings (the area side is pulc_port_close_locked). */
void pulc_local_forget(PSP_Port *port);

/* rawdata: copy data queued in the area into this process's registered buffers; 1 when
 * there was any, else 0. */
int pulc_raw_progress(struct pulc_proc *P);

#endif
