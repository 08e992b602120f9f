/*
 * mpidi_ch3_impl.h — the psport channel's internal interface between its files.
 *
 *   psport_init.c      init/finalize, VCs, business cards, the eager limit
 *   psport_send.c      CH3 packets (+ data) out as one PULC message each; send completion
 *   psport_recv.c      PULC messages in: headers in order per sender, data into CH3's iov
 *   psport_rndv.c      rendezvous: RTS/CTS/DONE, rawdata between nodes, process_vm_readv
 *   psport_progress.c  the progress engine and waiting
 *   psport_dynamic.c   spawn and ports: not supported (MPI_ERR_SPAWN)
 *   psport_win.c       RMA: CH3's defaults
 */
#ifndef MPIDI_CH3_IMPL_H_INCLUDED
#define MPIDI_CH3_IMPL_H_INCLUDED

#include "mpidimpl.h"
#include "pulc.h"

#include <string.h>

/*
 * What precedes every CH3 packet in the PULC extra header: the sender's rank in the process
 * group and its per-destination sequence number (the receive side records messages of a
 * sender in this order).  Host byte order, like CH3's packets: nodes are homogeneous.
 */
typedef struct MPIDI_CH3I_Wire {
    uint32_t seq;
    int32_t src_rank;
} MPIDI_CH3I_Wire_t;

/*
 * An eager-send packet on the wire without CH3's padding: 24 bytes, not 32 (type, match,
 * sender_req_id, data_sz at these offsets; the type says MPIDI_CH3I_WIRE_EAGER_PACKED).
 * Why: with the wire header and 8 bytes of data, a message (osu_mbw_mr's, any MPI_Isend's)
 * is then one 64-byte entry in a local ring, not two, and its receiver waits for one cache
 * line to come from the sender's core, not two (osu_mbw_mr at 8 B on one node, when this
 * VM's two cores were far apart: 30 -> 33 MB/s).  Unpacked by the receiver before CH3 sees it.
 */
#define MPIDI_CH3I_WIRE_EAGER_PACKED (-0x5053) /* no CH3 packet type is negative */
#define MPIDI_CH3I_PACKED_MATCH      4
#define MPIDI_CH3I_PACKED_REQ_ID     (MPIDI_CH3I_PACKED_MATCH + sizeof(MPIDI_Message_match))
#define MPIDI_CH3I_PACKED_DATA_SZ    (MPIDI_CH3I_PACKED_REQ_ID + sizeof(MPI_Request))
#define MPIDI_CH3I_PACKED_LEN        (MPIDI_CH3I_PACKED_DATA_SZ + sizeof(intptr_t))

/* The longest extra header: wire header + a whole CH3 packet (PULC takes up to 256 B). */
#define MPIDI_CH3I_XHDR_MAX (sizeof(MPIDI_CH3I_Wire_t) + sizeof(MPIDI_CH3_Pkt_t))

/* Copy n bytes, at most 16 (an eager-short message's data), without a call: two possibly
 * overlapping moves of 8, 4 or 1 bytes.  memcpy of an unknown small size is a library call
 * that cost a tenth of the channel's work per message of osu_mbw_mr's receiver. */
static inline void MPIDI_CH3I_Copy_short(void *restrict to, const void *restrict from, size_t n)
{
    unsigned char *d = to;
    const unsigned char *s = from;
    if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    }
}

/* This process's endpoint (NULL in a job of one process, which talks to nobody). */
extern PSP_Port *MPIDI_CH3I_port;
/* The node it is on (PULC node id), -1 without endpoint. */
extern int MPIDI_CH3I_node;

/* Packet handlers, CH3's and the channel's, indexed by packet type. */
extern MPIDI_CH3_PktHandler_Fcn *MPIDI_CH3I_pktArray[MPIDI_CH3_PKT_END_ALL];

/* The peer's port id, looked up from its business card the first time: MPI error code. */
int MPIDI_CH3I_VC_port(MPIDI_VC_t *vc, PSP_PortId *id);

/* The eager limit (payload bytes) from PSP_EAGER_MAX and MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE;
 * -1 with a message in err when the one that counts is not a number in 0..1 GiB. */
int MPIDI_CH3I_Eager_limit(char *err, size_t errlen);

/* ---- psport_send.c ---- */

/*
 * Send a CH3 packet (iov[0]) with the data of iov[1..n-1] as one PULC message.  With sreq
 * (iSend/iSendv) a reload handler (SendReloadIOV) is run until it has handed out all data,
 * and at completion sreq's OnDataAvail is called or sreq completed.  Without sreq
 * (iStartMsg*) a request is made only if the send does not complete at once (*sreq_out).
 * raw: a rawdata write instead (psport_rndv.c).  Returns an MPI error code.
 */
int MPIDI_CH3I_Send(MPIDI_VC_t *vc, MPIR_Request *sreq, const struct iovec *iov, int n,
                    MPIR_Request **sreq_out);

/* A rawdata write of len bytes at buf into the registration h; sreq completes with it. */
int MPIDI_CH3I_Send_raw(MPIDI_VC_t *vc, MPIR_Request *sreq, const PSP_RawHandle *h, const void *buf,
                        uint32_t len);

/* Complete the sends PULC has finished; *made set when one did.  MPI error code. */
int MPIDI_CH3I_Send_progress(int *made);

/*
 * Buffers for data the channel gathers (sends of several pieces) or holds for CH3 (data
 * received for an iov): n bytes, or NULL.  Large ones are kept for reuse when freed, as a
 * fresh large malloc costs a page fault per 4 KiB at first touch (RMA streams 256 KiB pieces
 * one after the other).  MPIDI_CH3I_Buf_free(NULL) does nothing.
 */
void *MPIDI_CH3I_Buf_alloc(size_t n);
void MPIDI_CH3I_Buf_free(void *buf);
void MPIDI_CH3I_Buf_finalize(void);

/* Sends still in PULC's hands. */
int MPIDI_CH3I_Send_pending(void);

/* ---- psport_progress.c ---- */

/* Free what the progress engine made (the threaded waiters' condition variable). */
int MPIDI_CH3I_Progress_finalize(void);

/* ---- psport_recv.c ---- */

/* Post the receive that records arriving packets; undo it.  MPI error codes. */
int MPIDI_CH3I_Recv_init(void);
void MPIDI_CH3I_Recv_finalize(void);

/* Finish data receives, hand recorded packets to CH3 in order per sender. */
int MPIDI_CH3I_Recv_progress(int *made);

/*
 * Between two passes of a spinning blocking wait (no send or rendezvous of ours in progress):
 * hand what our port's local rings hold to the watcher, and nothing else, until something
 * came or a pass is due (packets recorded, an event on the port, traffic with other nodes:
 * PSP_TakeLocal), at most RECV_LOOKS times.  Why: a pass that finds nothing costs ~440
 * instructions, and a message arriving during one waited on average half of that before the
 * ring was looked at, then for the rest of the pass after its handler had completed the
 * receive; a look is a few loads.  MPI error code (a handler's, as Recv_progress reports it).
 */
int MPIDI_CH3I_Recv_look(void);

/* ---- psport_rndv.c ---- */

/* Read the rendezvous settings (PSP_RNDV_CHUNK): 0, or -1 with the reason in err. */
int MPIDI_CH3I_Rndv_init(char *err, size_t errlen);

/* vc->rndvSend_fn and vc->rndvRecv_fn (CH3's signatures). */
int MPIDI_CH3I_Rndv_send(MPIR_Request **sreq_p, const void *buf, MPI_Aint count,
                         MPI_Datatype datatype, int dt_contig, intptr_t data_sz,
                         MPI_Aint dt_true_lb, int rank, int tag, MPIR_Comm *comm,
                         int context_offset);
int MPIDI_CH3I_Rndv_recv(MPIDI_VC_t *vc, MPIR_Request *rreq);

/* Handlers of the channel's packets. */
int MPIDI_CH3I_Pkt_rts(MPIDI_VC_t *vc, MPIDI_CH3_Pkt_t *pkt, void *data, intptr_t *buflen,
                       MPIR_Request **rreqp);
int MPIDI_CH3I_Pkt_cts(MPIDI_VC_t *vc, MPIDI_CH3_Pkt_t *pkt, void *data, intptr_t *buflen,
                       MPIR_Request **rreqp);
int MPIDI_CH3I_Pkt_done(MPIDI_VC_t *vc, MPIDI_CH3_Pkt_t *pkt, void *data, intptr_t *buflen,
                        MPIR_Request **rreqp);

/* Complete rendezvous receives whose rawdata has all arrived. */
int MPIDI_CH3I_Rndv_progress(int *made);

/* Rendezvous receives of ours whose data is still arriving (a pass must finish them). */
int MPIDI_CH3I_Rndv_pending(void);

/* ---- RMA: no shared-memory windows in this channel ---- */
#define MPIDI_CH3I_SHM_MUTEX_LOCK(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_UNLOCK(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_INIT(win_ptr)
#define MPIDI_CH3I_SHM_MUTEX_DESTROY(win_ptr)

#endif /* MPIDI_CH3_IMPL_H_INCLUDED */
