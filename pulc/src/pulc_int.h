/*
 * pulc_int.h — libpulc's process-side state shared by its modules: the open ports, the
 * requests in flight and the progress engine (port.c), used by the port-S/M streams and
 * rawdata.
 */
#ifndef PSPORT_PULC_INT_H
#define PSPORT_PULC_INT_H

#include <stdint.h>

#include "hal.h"
#include "marea.h"
#include "proto.h"
#include "pulc.h"

/* Progress runs the NIC at every call within PULC_NIC_BUSY_NS of inter-node traffic, else
 * at most every PULC_NIC_QUIET_NS (port.c). */
#define PULC_NIC_BUSY_NS  5000000ull
#define PULC_NIC_QUIET_NS 20000ull

/* Request states (p_state); 0 is complete so a zeroed request counts as complete. */
enum pulc_rq_state {
    PULC_RQ_DONE = 0,
    PULC_RQ_SEND_REMOTE, /* fragments still to post to the NIC */
    PULC_RQ_SEND_LOCAL,  /* local: waiting for message descriptors or fragments */
    PULC_RQ_SEND_DIRECT, /* local, large: the reader copies from our buffer */
    PULC_RQ_RECV_POSTED, /* waiting for a message accept() takes */
    PULC_RQ_RECV_MATCHED /* taking the message's data as it arrives */
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
};

struct pulc_proc {
    struct pulc_hal *h;
    struct pulc_node node;
    PSP_Port *ports;
    PSP_Request *rsend_head, *rsend_tail; /* remote sends not fully posted, in order */
    PSP_Request *lsend_head, *lsend_tail; /* local sends not complete, in order */
    uint32_t local_direct;                /* PSP_LOCAL_DIRECT */
    uint64_t remote_ns;                   /* last time we sent to or received from another node */
    uint64_t nic_ns;                      /* last time progress ran the NIC */
    uint32_t calls;    /* progress calls (the clock is read every 32nd while quiet) */
    int nic_busy;      /* inter-node traffic lately: run the NIC at every call */
    unsigned raw_regs; /* rawdata registrations of this process */
};

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

/* rawdata: copy data queued in the area into this process's registered buffers. */
void pulc_raw_progress(struct pulc_proc *P);

#endif
