/*
 * psport_rndv.c — the rendezvous protocol for messages above the eager limit, hooked into
 * CH3 through vc->rndvSend_fn / vc->rndvRecv_fn (as nemesis hooks its large message
 * transfer), with the channel's own packets:
 *
 *   sender                         receiver (once the message is matched)
 *   RTS (match, size, pid, addr) →
 *                                  same node:  process_vm_readv from the sender's buffer
 *                                ← DONE        (the sender's request completes)
 *                                  other node: register the user buffer for rawdata
 *                                ← CTS (handle, offset, bytes)
 *   PSP_RawSend into it          →             complete when all bytes are in
 *
 * A registration, like a PULC message, holds less than 4 GiB: between nodes the receiver opens
 * its buffer PSP_RNDV_CHUNK bytes at a time, one CTS each, the next when the last is full; the
 * CTS of the last piece says so, and the send completes with that piece.  A same-node message
 * of 4 GiB or more is read with process_vm_readv (no limit there).
 *
 * Either way the data is copied once, with no intermediate buffer — unless the receive
 * datatype is not contiguous, then into a buffer of the message's size that is unpacked.
 * A non-contiguous send buffer goes CH3's own rendezvous (MPIDI_CH3_RndvSend), which sends
 * the data as one eager-style message once the receiver is ready.  So does a message of at
 * least PSP_SHARED_COPY_MIN bytes to a process on the same node: its data is then one PULC
 * message that the receiver takes straight into the user buffer, and PULC copies it with
 * both processes at once (each takes chunks while it makes progress), where our
 * process_vm_readv above copies with the receiver alone.  osu_bw on one node went from
 * 18-19 to 26-28 GB/s at 1 MiB and to 31-34 GB/s at 4 MiB.
 */
#include "mpidi_ch3_impl.h"

#include <sys/uio.h>
#include <unistd.h>

#include "settings.h"

/* A receive waiting for rawdata: the piece [off, off + len) of its total bytes at base. */
typedef struct psport_raw_recv {
    struct psport_raw_recv *next;
    MPIR_Request *rreq;
    MPIDI_VC_t *vc;
    PSP_RawHandle handle;
    PSP_PortId writer; /* the sender's port */
    char *base;
    uint64_t off, total;
    uint32_t len;
    void *tmp; /* non-contiguous receive buffer (base): unpack from here */
} psport_raw_recv_t;

static psport_raw_recv_t *raw_recvs;
static uint32_t rndv_chunk = 1u << 30; /* PSP_RNDV_CHUNK */

int MPIDI_CH3I_Rndv_init(char *err, size_t errlen)
{
    uint64_t v;
    if (psp_setting_u64("PSP_RNDV_CHUNK", 4096, UINT32_MAX, &v, err, errlen))
        return -1;
    rndv_chunk = (uint32_t)v;
    return 0;
}

/* Whether a message of data_sz bytes to vc is copied by both processes (see the top): one PULC
 * message, so less than 4 GiB. */
static int shared_copy(MPIDI_VC_t *vc, intptr_t data_sz)
{
    PSP_PortId peer;
    return data_sz >= (intptr_t)PSP_SHARED_COPY_MIN && (uint64_t)data_sz <= UINT32_MAX &&
           MPIDI_CH3I_VC_port(vc, &peer) == MPI_SUCCESS && PSP_PORTID_NODE(peer) == MPIDI_CH3I_node;
}

/* Send a CTS: write len bytes at offset of the message into registration h (NULL: nothing more
 * comes, the send completes without data; the receive is empty, truncated to nothing, or
 * failed). */
static int send_cts(MPIDI_VC_t *vc, MPI_Request sender_req_id, const PSP_RawHandle *h,
                    uint64_t offset, uint32_t len, int last)
{
    MPIDI_CH3_Pkt_t upkt;
    MPIDI_CH3I_Pkt_psp_cts_t *cts = &upkt.psp_cts;
    MPIR_Request *cts_req = NULL;
    MPIDI_Pkt_init(cts, MPIDI_CH3I_PKT_PSP_CTS);
    cts->sender_req_id = sender_req_id;
    cts->len = h ? len : 0;
    cts->raw_port = h ? h->port : 0;
    cts->raw_index = h ? h->index : 0;
    cts->raw_nonce = h ? h->nonce : 0;
    cts->last = h ? last : 1;
    cts->offset = h ? offset : 0;
    int mpi_errno = MPIDI_CH3_iStartMsg(vc, cts, sizeof *cts, &cts_req);
    if (!mpi_errno && cts_req)
        MPIR_Request_free(cts_req);
    return mpi_errno;
}

/* Open the piece of w at w->off (its length set here) to the sender with a CTS.  On an error
 * the piece's registration is gone again. */
static int open_piece(psport_raw_recv_t *w)
{
    int mpi_errno = MPI_SUCCESS;
    uint64_t left = w->total - w->off;
    w->len = left < rndv_chunk ? (uint32_t)left : rndv_chunk;
    int rc = PSP_RawRegister(MPIDI_CH3I_port, w->base + w->off, w->len, &w->handle);
    if (rc)
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**psport_pulc", "**psport_pulc %s",
                             PSP_StrError(rc));
    mpi_errno = send_cts(w->vc, w->rreq->dev.sender_req_id, &w->handle, w->off, w->len,
                         w->off + w->len == w->total);
    if (mpi_errno) /* no CTS, no data */
        PSP_RawUnregister(MPIDI_CH3I_port, &w->handle);
fn_fail:
    return mpi_errno;
}

int MPIDI_CH3I_Rndv_send(MPIR_Request **sreq_p, const void *buf, MPI_Aint count,
                         MPI_Datatype datatype, int dt_contig, intptr_t data_sz,
                         MPI_Aint dt_true_lb, int rank, int tag, MPIR_Comm *comm,
                         int context_offset)
{
    int mpi_errno = MPI_SUCCESS;
    MPIR_Request *sreq = *sreq_p, *rts_sreq = NULL;
    MPIDI_VC_t *vc;
    /* Refused here, on the sender's own call: CH3's rendezvous (non-contiguous data: one PULC
     * message) would send its RTS first and fail only at the data, leaving the receiver
     * waiting for ever. */
    if (!dt_contig && (uint64_t)data_sz > UINT32_MAX) { /* as for a failed RTS (below) */
        MPIR_Request_free(sreq);
        *sreq_p = NULL;
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_COUNT, "**psport_toolong", "**psport_toolong %L",
                             (long long)data_sz);
    }
    MPIDI_Comm_get_vc_set_active(comm, rank, &vc);
    if (!dt_contig || shared_copy(vc, data_sz)) /* one PULC message */
        return MPIDI_CH3_RndvSend(sreq_p, buf, count, datatype, dt_contig, data_sz, dt_true_lb,
                                  rank, tag, comm, context_offset);

    MPIDI_CH3_Pkt_t upkt;
    MPIDI_CH3I_Pkt_psp_rts_t *rts = &upkt.psp_rts;
    MPIDI_Pkt_init(rts, MPIDI_CH3I_PKT_PSP_RTS);
    rts->match.parts.rank = comm->rank;
    rts->match.parts.tag = tag;
    rts->match.parts.context_id = comm->context_id + context_offset;
    rts->sender_req_id = sreq->handle;
    rts->data_sz = data_sz;
    rts->pid = (int32_t)getpid();
    rts->addr = (uint64_t)(uintptr_t)MPIR_get_contig_ptr(buf, dt_true_lb);
    sreq->dev.OnDataAvail = NULL;
    sreq->dev.partner_request = NULL;

    mpi_errno = MPIDI_CH3_iStartMsg(vc, rts, sizeof *rts, &rts_sreq);
    if (mpi_errno) {
        MPIR_Request_free(sreq);
        *sreq_p = NULL;
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**ch3|rtspkt");
    }
    if (rts_sreq)
        MPIR_Request_free(rts_sreq); /* the RTS completes on its own */
fn_fail:
    return mpi_errno;
}

/* rreq is matched: move its data (see the top of this file). */
static int start_recv(MPIDI_VC_t *vc, MPIR_Request *rreq)
{
    int mpi_errno = MPI_SUCCESS;
    int dt_contig;
    MPI_Aint dt_true_lb;
    intptr_t userbuf_sz;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(rreq->dev.user_count, rreq->dev.datatype, dt_contig, userbuf_sz, dt_ptr,
                            dt_true_lb);
    (void)dt_ptr;
    intptr_t n = rreq->dev.recv_data_sz;
    if (n > userbuf_sz) { /* truncated: take what fits, report MPI_ERR_TRUNCATE */
        rreq->status.MPI_ERROR = MPIR_Err_create_code(
            MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_TRUNCATE, "**truncate",
            "**truncate %d %d %d %d", rreq->status.MPI_SOURCE, rreq->status.MPI_TAG,
            (int)rreq->dev.recv_data_sz, (int)userbuf_sz);
        n = userbuf_sz;
    }
    MPIR_STATUS_SET_COUNT(rreq->status, n);
    void *tmp = NULL, *dst = MPIR_get_contig_ptr(rreq->dev.user_buf, dt_true_lb);
    if (!dt_contig && n) {
        tmp = MPL_malloc(n, MPL_MEM_BUFFER);
        MPIR_ERR_CHKANDJUMP1(tmp == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem", "**nomem %d",
                             (int)n);
        dst = tmp;
    }
    PSP_PortId peer;
    mpi_errno = MPIDI_CH3I_VC_port(vc, &peer);
    MPIR_ERR_CHECK(mpi_errno);

    if (PSP_PORTID_NODE(peer) == MPIDI_CH3I_node) {
        /* Same node: read the sender's buffer directly, then let it go. */
        intptr_t got = 0;
        while (got < n) {
            struct iovec l = {(char *)dst + got, (size_t)(n - got)};
            struct iovec r = {(void *)(uintptr_t)(rreq->ch.rndv_addr + (uint64_t)got),
                              (size_t)(n - got)};
            ssize_t k = process_vm_readv(rreq->ch.rndv_pid, &l, 1, &r, 1, 0);
            if (k <= 0) {
                char ebuf[128];
                rreq->status.MPI_ERROR = MPIR_Err_create_code(
                    MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER,
                    "**psport_vmread", "**psport_vmread %d %s", vc->pg_rank,
                    k < 0 ? MPIR_Strerror(errno, ebuf, sizeof ebuf) : "no data");
                break;
            }
            got += k;
        }
        MPIDI_CH3_Pkt_t upkt;
        MPIDI_CH3I_Pkt_psp_done_t *done = &upkt.psp_done;
        MPIR_Request *done_req = NULL;
        MPIDI_Pkt_init(done, MPIDI_CH3I_PKT_PSP_DONE);
        done->sender_req_id = rreq->dev.sender_req_id;
        mpi_errno = MPIDI_CH3_iStartMsg(vc, done, sizeof *done, &done_req);
        MPIR_ERR_CHECK(mpi_errno); /* (fn_fail frees tmp) */
        if (done_req)
            MPIR_Request_free(done_req);
        if (tmp) {
            MPI_Aint unpacked;
            MPIR_Typerep_unpack(tmp, got, rreq->dev.user_buf, rreq->dev.user_count,
                                rreq->dev.datatype, 0, &unpacked);
            MPL_free(tmp);
        }
        return MPID_Request_complete(rreq);
    }
    /* From here on a failure frees tmp at fn_fail, and the record w with its registration
     * where it happens. */

    /* Another node: register the buffer (its first piece), tell the sender where to write. */
    if (!n) { /* nothing to wait for */
        mpi_errno = send_cts(vc, rreq->dev.sender_req_id, NULL, 0, 0, 1);
        MPIR_ERR_CHECK(mpi_errno);
        return MPID_Request_complete(rreq);
    }
    psport_raw_recv_t *w = MPL_malloc(sizeof *w, MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(w == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    w->rreq = rreq;
    w->vc = vc;
    w->writer = peer;
    w->base = dst;
    w->off = 0;
    w->total = (uint64_t)n;
    w->tmp = tmp;
    mpi_errno = open_piece(w);
    if (mpi_errno) {
        MPL_free(w);
        goto fn_fail;
    }
    w->next = raw_recvs;
    raw_recvs = w;
    return MPI_SUCCESS;
fn_fail:
    MPL_free(tmp); /* a registered receive's record, which owns it, is gone too */
    return mpi_errno;
}

int MPIDI_CH3I_Rndv_recv(MPIDI_VC_t *vc, MPIR_Request *rreq)
{
    if (!rreq->ch.psp_rndv) /* announced by CH3's own RTS */
        return MPIDI_CH3_RecvRndv(vc, rreq);
    return start_recv(vc, rreq);
}

int MPIDI_CH3I_Pkt_rts(MPIDI_VC_t *vc, MPIDI_CH3_Pkt_t *pkt, void *data, intptr_t *buflen,
                       MPIR_Request **rreqp)
{
    int mpi_errno = MPI_SUCCESS, found;
    MPIDI_CH3I_Pkt_psp_rts_t *rts = &pkt->psp_rts;
    (void)data;
    *buflen = 0;
    *rreqp = NULL;
    MPID_THREAD_CS_ENTER(POBJ, MPIR_THREAD_POBJ_MSGQ_MUTEX);
    MPIR_Request *rreq = MPIDI_CH3U_Recvq_FDP_or_AEU(&rts->match, &found);
    if (!rreq) {
        MPID_THREAD_CS_EXIT(POBJ, MPIR_THREAD_POBJ_MSGQ_MUTEX);
        MPIR_ERR_SETANDJUMP1(mpi_errno, MPI_ERR_OTHER, "**nomemreq", "**nomemuereq %d",
                             MPIDI_CH3U_Recvq_count_unexp());
    }
    /* A revoked communicator's message: CH3 dropped it (its request is complete). */
    if (!found && MPIR_cc_get(rreq->cc) == 0) {
        MPID_THREAD_CS_EXIT(POBJ, MPIR_THREAD_POBJ_MSGQ_MUTEX);
        return MPI_SUCCESS;
    }
    rreq->status.MPI_SOURCE = rts->match.parts.rank;
    rreq->status.MPI_TAG = rts->match.parts.tag;
    MPIR_STATUS_SET_COUNT(rreq->status, rts->data_sz);
    rreq->dev.sender_req_id = rts->sender_req_id;
    rreq->dev.recv_data_sz = rts->data_sz;
    MPIDI_Request_set_msg_type(rreq, MPIDI_REQUEST_RNDV_MSG);
    rreq->ch.psp_rndv = 1;
    rreq->ch.rndv_pid = rts->pid;
    rreq->ch.rndv_addr = rts->addr;
    MPID_THREAD_CS_EXIT(POBJ, MPIR_THREAD_POBJ_MSGQ_MUTEX);
    if (found)
        mpi_errno = start_recv(vc, rreq);
    else /* a probe may be waiting for it */
        MPIDI_CH3_Progress_signal_completion();
fn_fail:
    return mpi_errno;
}

int MPIDI_CH3I_Pkt_cts(MPIDI_VC_t *vc, MPIDI_CH3_Pkt_t *pkt, void *data, intptr_t *buflen,
                       MPIR_Request **rreqp)
{
    int mpi_errno = MPI_SUCCESS;
    MPIDI_CH3I_Pkt_psp_cts_t *cts = &pkt->psp_cts;
    MPIR_Request *sreq;
    (void)data;
    *buflen = 0;
    *rreqp = NULL;
    MPIR_Request_get_ptr(cts->sender_req_id, sreq);
    if (!cts->len) /* nothing to write (empty or truncated to nothing), or the receive failed */
        return MPID_Request_complete(sreq);
    int dt_contig;
    MPI_Aint dt_true_lb;
    intptr_t data_sz;
    MPIR_Datatype *dt_ptr;
    MPIDI_Datatype_get_info(sreq->dev.user_count, sreq->dev.datatype, dt_contig, data_sz, dt_ptr,
                            dt_true_lb);
    (void)dt_ptr;
    MPIR_Assert(dt_contig && cts->offset + cts->len <= (uint64_t)data_sz);
    PSP_RawHandle h = {cts->raw_port, cts->raw_index, cts->raw_nonce};
    /* Only the last piece completes the send; an earlier one that fails is an error of the
     * progress engine (the receiver then sends no more CTS). */
    const char *base = MPIR_get_contig_ptr(sreq->dev.user_buf, dt_true_lb);
    mpi_errno = MPIDI_CH3I_Send_raw(vc, cts->last ? sreq : NULL, &h, base + cts->offset, cts->len);
    return mpi_errno;
}

int MPIDI_CH3I_Pkt_done(MPIDI_VC_t *vc, MPIDI_CH3_Pkt_t *pkt, void *data, intptr_t *buflen,
                        MPIR_Request **rreqp)
{
    MPIR_Request *sreq;
    (void)vc;
    (void)data;
    *buflen = 0;
    *rreqp = NULL;
    MPIR_Request_get_ptr(pkt->psp_done.sender_req_id, sreq);
    return MPID_Request_complete(sreq);
}

int MPIDI_CH3I_Rndv_pending(void)
{
    return raw_recvs != NULL;
}

int MPIDI_CH3I_Rndv_progress(int *made)
{
    int mpi_errno = MPI_SUCCESS;
    for (psport_raw_recv_t **pp = &raw_recvs; *pp;) {
        psport_raw_recv_t *w = *pp;
        int64_t got = PSP_RawReceived(MPIDI_CH3I_port, &w->handle);
        if (got >= 0 && got < w->len) {
            pp = &w->next;
            continue;
        }
        *made = 1;
        MPIR_Request *rreq = w->rreq;
        PSP_RawUnregister(MPIDI_CH3I_port, &w->handle); /* (gone already after some errors) */
        /* The rank may go off to compute now: the frames it owes an ACK for would hold the
         * sender's window until psid's NIC thread ran (up to PSP_NIC_QUIET_US). */
        if (got >= 0)
            (void)PSP_AckNow(w->writer);
        int more = w->off + w->len < w->total;
        if (got >= 0 && more) { /* the next piece (w stays where it is) */
            w->off += w->len;
            int e = open_piece(w);
            if (!e) {
                pp = &w->next;
                continue;
            }
            rreq->status.MPI_ERROR = e;
        } else if (got < 0) {
            rreq->status.MPI_ERROR =
                MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                     MPI_ERR_OTHER, "**psport_recv", "**psport_recv %d %s",
                                     rreq->status.MPI_SOURCE, PSP_StrError((int)got));
        }
        /* Pieces left that will not be opened: the sender's send would wait for them. */
        if (more)
            (void)send_cts(w->vc, rreq->dev.sender_req_id, NULL, 0, 0, 1);
        *pp = w->next; /* (a CTS's send runs no pass of ours: nothing moved in the list) */
        if (w->tmp) {
            MPI_Aint unpacked;
            MPIR_Typerep_unpack(w->tmp, (MPI_Aint)w->total, rreq->dev.user_buf,
                                rreq->dev.user_count, rreq->dev.datatype, 0, &unpacked);
            MPL_free(w->tmp);
        }
        MPL_free(w);
        int e = MPID_Request_complete(rreq);
        if (e && !mpi_errno)
            mpi_errno = e;
    }
    return mpi_errno;
}
