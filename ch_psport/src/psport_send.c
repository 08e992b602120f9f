/*
 * psport_send.c — CH3's send interface: each CH3 packet goes out as one PULC port-D message,
 * the packet (behind a small wire header) as the extra header and its data as the payload.
 * Contiguous data is handed to PULC in place; several pieces (non-contiguous data, RMA
 * headers) are gathered into one buffer first.  A send PULC cannot finish at once is kept
 * in a record until it completes; then its request completes or its OnDataAvail runs.
 */
#include "mpidi_ch3_impl.h"

#include <stdlib.h>
#include <string.h>

/* One send in PULC's hands. */
typedef struct psport_send {
    PSP_Request preq; /* first: PULC's request */
    struct psport_send *next;
    MPIDI_VC_t *vc;
    MPIR_Request *sreq; /* completed (or OnDataAvail called) when PULC is done; may be NULL */
    PSP_PortId drain;   /* rendezvous data: done only once its frames left the NIC; 0 none */
    void *gather;       /* payload gathered from several pieces, freed when done */
    union {             /* wire header + packet: must live until PULC is done */
        MPIDI_CH3I_Wire_t wire;
        unsigned char bytes[MPIDI_CH3I_XHDR_MAX];
    } x;
} psport_send_t;

/* ---- buffers for gathered and held data ---- */

/* Each buffer has a header with its capacity in front; 64 bytes keep the data aligned for
 * the widest vector copies. */
#define BUF_HDR        64u
#define BUF_KEEP_MIN   (64u << 10) /* smaller ones go back to malloc, which reuses them well */
#define BUF_KEEP_MAX   (8u << 20)  /* larger ones are rare: not kept */
#define BUF_KEEP_SLOTS 8

static void *kept[BUF_KEEP_SLOTS]; /* free large buffers (their headers) */

void *MPIDI_CH3I_Buf_alloc(size_t n)
{
    if (n >= BUF_KEEP_MIN) { /* the smallest kept buffer that fits */
        int best = -1;
        for (int i = 0; i < BUF_KEEP_SLOTS; i++)
            if (kept[i] && *(size_t *)kept[i] >= n &&
                (best < 0 || *(size_t *)kept[i] < *(size_t *)kept[best]))
                best = i;
        if (best >= 0) {
            char *h = kept[best];
            kept[best] = NULL;
            return h + BUF_HDR;
        }
    }
    char *h = MPL_malloc(BUF_HDR + (n ? n : 1), MPL_MEM_BUFFER);
    if (!h)
        return NULL;
    *(size_t *)h = n;
    return h + BUF_HDR;
}

void MPIDI_CH3I_Buf_free(void *buf)
{
    if (!buf)
        return;
    char *h = (char *)buf - BUF_HDR;
    size_t cap = *(size_t *)h;
    if (cap >= BUF_KEEP_MIN && cap <= BUF_KEEP_MAX) { /* keep it, in place of a smaller one */
        int slot = -1; /* an empty one if any, else the smallest kept */
        for (int i = 0; i < BUF_KEEP_SLOTS && slot < 0; i++)
            if (!kept[i])
                slot = i;
        if (slot < 0) {
            slot = 0;
            for (int i = 1; i < BUF_KEEP_SLOTS; i++)
                if (*(size_t *)kept[i] < *(size_t *)kept[slot])
                    slot = i;
        }
        if (!kept[slot] || *(size_t *)kept[slot] < cap) {
            MPL_free(kept[slot]);
            kept[slot] = h;
            return;
        }
    }
    MPL_free(h);
}

void MPIDI_CH3I_Buf_finalize(void)
{
    for (int i = 0; i < BUF_KEEP_SLOTS; i++) {
        MPL_free(kept[i]);
        kept[i] = NULL;
    }
}

/* ---- sends ---- */

static psport_send_t *active_head, *active_tail; /* in the order posted */
static psport_send_t *free_list;
static int active_count;

static psport_send_t *rec_get(void)
{
    psport_send_t *r = free_list;
    if (r)
        free_list = r->next;
    else
        r = MPL_malloc(sizeof *r, MPL_MEM_BUFFER);
    if (r) {
        r->next = NULL;
        r->sreq = NULL;
        r->gather = NULL;
        r->drain = 0;
    }
    return r;
}

static void rec_put(psport_send_t *r)
{
    MPIDI_CH3I_Buf_free(r->gather);
    r->gather = NULL;
    r->next = free_list;
    free_list = r;
}

/* The request of a send that went at once: complete it, or run its OnDataAvail. */
static int sent_now(MPIDI_VC_t *vc, MPIR_Request *sreq)
{
    if (!sreq)
        return MPI_SUCCESS;
    int (*reqFn)(MPIDI_VC_t *, MPIR_Request *, int *) = sreq->dev.OnDataAvail;
    if (!reqFn)
        return MPID_Request_complete(sreq);
    int complete = 0;
    int mpi_errno = reqFn(vc, sreq, &complete);
    MPIR_Assert(complete); /* all data went with the message */
    return mpi_errno;
}

/* The send of r is done (PULC's result in r->preq.error): finish its request. */
static int finish(psport_send_t *r)
{
    MPIR_Request *sreq = r->sreq;
    int err = r->preq.error;
    MPIDI_VC_t *vc = r->vc;
    rec_put(r);
    if (!sreq)
        return err ? MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                          MPI_ERR_OTHER, "**psport_send", "**psport_send %d %s",
                                          vc->pg_rank, PSP_StrError(err))
                   : MPI_SUCCESS;
    if (err)
        sreq->status.MPI_ERROR = MPIR_Err_create_code(
            MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__, MPI_ERR_OTHER, "**psport_send",
            "**psport_send %d %s", vc->pg_rank, PSP_StrError(err));
    return sent_now(vc, sreq);
}

/* Append n pieces to the growing buffer *buf (size *len, capacity *cap): 0 or -1 (memory). */
static int gather(void **buf, size_t *len, size_t *cap, const struct iovec *iov, int n)
{
    size_t add = 0;
    for (int i = 0; i < n; i++)
        add += iov[i].iov_len;
    if (*len + add > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + add)
            c *= 2;
        void *nb = MPIDI_CH3I_Buf_alloc(c);
        if (!nb)
            return -1;
        if (*len)
            memcpy(nb, *buf, *len);
        MPIDI_CH3I_Buf_free(*buf);
        *buf = nb;
        *cap = c;
    }
    for (int i = 0; i < n; i++) {
        memcpy((char *)*buf + *len, iov[i].iov_base, iov[i].iov_len);
        *len += iov[i].iov_len;
    }
    return 0;
}

#define DRAIN_MIN 8192u /* eager data from here on waits until its frames have left (below) */

/*
 * Whether PULC is done with r.  Rendezvous data, and eager data of DRAIN_MIN bytes and more,
 * also waits until its frames have left the NIC: PULC completes a send once its data is
 * posted, and a blocking MPI_Send would return while frames behind the peer's window wait;
 * its rank then computes, and they go out only when psid's NIC thread runs (PDGEMM between
 * two nodes lost up to half its speed at small N).  Polling here, the rank sends them itself
 * as the ACKs come back.
 */
static int send_done(psport_send_t *r)
{
    return PSP_IsComplete(&r->preq) && (!r->drain || r->preq.error || !PSP_SendWaiting(r->drain));
}

/* Hand r to PULC (already posted by the caller): done now, or queue it. */
static int settle(psport_send_t *r, MPIR_Request **sreq_out, int make_request)
{
    int mpi_errno = MPI_SUCCESS;
    if (PSP_Test(&r->preq) && send_done(r))
        return finish(r);
    if (make_request) { /* iStartMsg*: the caller gets a request only now */
        MPIR_Request *sreq = MPIR_Request_create(MPIR_REQUEST_KIND__SEND);
        MPIR_ERR_CHKANDJUMP(sreq == NULL, mpi_errno, MPI_ERR_OTHER, "**nomemreq");
        MPIR_Object_set_ref(sreq, 2); /* one for the caller, one for the completion */
        sreq->dev.OnDataAvail = NULL;
        r->sreq = sreq;
        *sreq_out = sreq;
    }
    if (active_tail)
        active_tail->next = r;
    else
        active_head = r;
    active_tail = r;
    active_count++;
fn_fail:
    return mpi_errno;
}

/*
 * Put packet pkt (len bytes as CH3 gave it) on the wire at out; returns the bytes written.
 * An eager-short packet carries its data in a fixed 16-byte array, and only data_sz bytes of
 * it go; an eager-send packet goes packed (mpidi_ch3_impl.h).  The receiver zeroes what a
 * packet lacks and unpacks (psport_recv.c).  Why: an 8-byte message's entry in a local ring
 * is then one cache line (24 header + 8 wire + 32 or 24 + 8 packet and data), not two.
 */
static size_t pkt_to_wire(const MPIDI_CH3_Pkt_t *pkt, size_t len, unsigned char *out)
{
    if (pkt->type == MPIDI_CH3_PKT_EAGERSHORT_SEND) {
        const MPIDI_CH3_Pkt_eagershort_send_t *es = &pkt->eagershort_send;
        size_t used = offsetof(MPIDI_CH3_Pkt_eagershort_send_t, data) + (size_t)es->data_sz;
        if (es->data_sz >= 0 && used < len)
            len = used;
    }
#if !defined(MPID_USE_SEQUENCE_NUMBERS) /* packed: every field of the packet but padding */
    else if (pkt->type == MPIDI_CH3_PKT_EAGER_SEND && len == sizeof(MPIDI_CH3_Pkt_send_t)) {
        const MPIDI_CH3_Pkt_send_t *es = &pkt->eager_send;
        const int32_t type = MPIDI_CH3I_WIRE_EAGER_PACKED;
        memcpy(out, &type, sizeof type);
        memcpy(out + MPIDI_CH3I_PACKED_MATCH, &es->match, sizeof es->match);
        memcpy(out + MPIDI_CH3I_PACKED_REQ_ID, &es->sender_req_id, sizeof es->sender_req_id);
        memcpy(out + MPIDI_CH3I_PACKED_DATA_SZ, &es->data_sz, sizeof es->data_sz);
        return MPIDI_CH3I_PACKED_LEN;
    }
#endif
    memcpy(out, pkt, len);
    return len;
}

int MPIDI_CH3I_Send(MPIDI_VC_t *vc, MPIR_Request *sreq, const struct iovec *iov, int n,
                    MPIR_Request **sreq_out)
{
    int mpi_errno = MPI_SUCCESS;
    PSP_PortId dest;
    psport_send_t *r = NULL;
    if (sreq_out)
        *sreq_out = NULL;
    MPIR_Assert(n >= 1 && iov[0].iov_len <= sizeof(MPIDI_CH3_Pkt_t));
    MPIR_ERR_CHKANDJUMP(MPIDI_CH3I_port == NULL, mpi_errno, MPI_ERR_OTHER, "**psport_noport");
    mpi_errno = MPIDI_CH3I_VC_port(vc, &dest);
    MPIR_ERR_CHECK(mpi_errno);
    union {
        MPIDI_CH3I_Wire_t wire;
        unsigned char bytes[MPIDI_CH3I_XHDR_MAX];
    } x;
    x.wire.seq = vc->ch.send_seq;
    x.wire.src_rank = MPIDI_Process.my_pg_rank;
    size_t pkt_len =
        pkt_to_wire(iov[0].iov_base, iov[0].iov_len, x.bytes + sizeof(MPIDI_CH3I_Wire_t));
    uint16_t xlen = (uint16_t)(sizeof(MPIDI_CH3I_Wire_t) + pkt_len);
    /* A small message to a rank on this node goes through the ring at once (PSP_SendNow),
     * without a record and a PULC request: most of a stream of small sends' own cost. */
    size_t now_len = n == 2 ? iov[1].iov_len : 0;
    if ((n == 1 || (n == 2 && now_len <= UINT32_MAX &&
                    !(sreq && sreq->dev.OnDataAvail == MPIDI_CH3_ReqHandler_SendReloadIOV))) &&
        PSP_SendNow(MPIDI_CH3I_port, dest, x.bytes, xlen, n == 2 ? iov[1].iov_base : NULL,
                    (uint32_t)now_len) == 1) {
        vc->ch.send_seq++;
        return sent_now(vc, sreq);
    }
    r = rec_get();
    MPIR_ERR_CHKANDJUMP(r == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    r->vc = vc;
    r->sreq = sreq;
    memcpy(r->x.bytes, x.bytes, xlen);

    const void *data = NULL;
    size_t len = 0;
    int reload = sreq && sreq->dev.OnDataAvail == MPIDI_CH3_ReqHandler_SendReloadIOV;
    if (n == 2 && !reload) { /* the common case: contiguous data, sent in place */
        data = iov[1].iov_base;
        len = iov[1].iov_len;
    } else if (n > 1 || reload) {
        /* One buffer of the whole size where it is known: no regrowing and recopying. */
        size_t cap = 0;
        for (int i = 1; i < n; i++)
            cap += iov[i].iov_len;
        if (reload && sreq->dev.msgsize > sreq->dev.msg_offset)
            cap += (size_t)(sreq->dev.msgsize - sreq->dev.msg_offset);
        void *buf = cap ? MPIDI_CH3I_Buf_alloc(cap) : NULL;
        if (cap && !buf)
            cap = 0;
        int bad = gather(&buf, &len, &cap, iov + 1, n - 1);
        /* Non-contiguous data: CH3 hands it out one iov at a time through the reload
         * handler, which at the last piece swaps in the request's final OnDataAvail. */
        while (!bad && sreq->dev.OnDataAvail == MPIDI_CH3_ReqHandler_SendReloadIOV) {
            int complete = 0;
            mpi_errno = MPIDI_CH3_ReqHandler_SendReloadIOV(vc, sreq, &complete);
            if (mpi_errno)
                break;
            bad =
                gather(&buf, &len, &cap, sreq->dev.iov + sreq->dev.iov_offset, sreq->dev.iov_count);
        }
        r->gather = buf;
        data = buf;
        if (bad && !mpi_errno)
            MPIR_ERR_SET1(mpi_errno, MPI_ERR_OTHER, "**nomem", "**nomem %d", (int)len);
        MPIR_ERR_CHECK(mpi_errno);
    }
    MPIR_ERR_CHKANDJUMP1(len > UINT32_MAX, mpi_errno, MPI_ERR_OTHER, "**psport_toolong",
                         "**psport_toolong %L", (long long)len);

    if (len >= DRAIN_MIN)
        r->drain = dest;
    int rc = PSP_ISend(MPIDI_CH3I_port, dest, r->x.bytes, xlen, data, (uint32_t)len, &r->preq);
    if (rc)
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**psport_send", "**psport_send %d %s",
                             vc->pg_rank, PSP_StrError(rc));
    vc->ch.send_seq++;
    return settle(r, sreq_out, sreq == NULL);
fn_fail:
    if (r)
        rec_put(r);
    return mpi_errno;
}

int MPIDI_CH3I_Send_short(MPIDI_VC_t *vc, int type, const void *buf, intptr_t data_sz, int rank,
                          int tag, int context_id, MPIR_Request **sreq_p)
{
    struct {
        MPIDI_CH3I_Wire_t wire;
        MPIDI_CH3_Pkt_eagershort_send_t pkt;
    } x;
    _Static_assert(offsetof(__typeof__(x), pkt) == sizeof(MPIDI_CH3I_Wire_t),
                   "the packet follows the wire header directly");
    const size_t data_at = offsetof(MPIDI_CH3_Pkt_eagershort_send_t, data);
    MPIR_Assert(data_sz >= 0 && data_sz <= MPIDI_EAGER_SHORT_SIZE);
    *sreq_p = NULL;
    memset(&x.pkt, 0, data_at); /* the padding too: it goes on the wire */
    x.pkt.type = type;
    x.pkt.match.parts.rank = (MPIDI_Rank_t)rank;
    x.pkt.match.parts.tag = tag;
    x.pkt.match.parts.context_id = (MPIR_Context_id_t)context_id;
    x.pkt.data_sz = data_sz;
    MPIDI_CH3I_Copy_short(x.pkt.data, buf, (size_t)data_sz);
    /* A rank on this node whose port is known: through the ring at once (what
     * MPIDI_CH3I_Send does for any packet, with the packet cut after its data: pkt_to_wire). */
    if (vc->ch.port && MPIDI_CH3I_port) {
        x.wire.seq = vc->ch.send_seq;
        x.wire.src_rank = MPIDI_Process.my_pg_rank;
        uint16_t xlen = (uint16_t)(sizeof x.wire + data_at + (size_t)data_sz);
        if (PSP_SendNow(MPIDI_CH3I_port, vc->ch.port, &x, xlen, NULL, 0) == 1) {
            vc->ch.send_seq++;
            return MPI_SUCCESS;
        }
    }
    struct iovec iov = {&x.pkt, sizeof x.pkt};
    return MPIDI_CH3I_Send(vc, NULL, &iov, 1, sreq_p);
}

int MPIDI_CH3I_Send_raw(MPIDI_VC_t *vc, MPIR_Request *sreq, const PSP_RawHandle *h, const void *buf,
                        uint32_t len)
{
    int mpi_errno = MPI_SUCCESS;
    psport_send_t *r = rec_get();
    MPIR_ERR_CHKANDJUMP(r == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    r->vc = vc;
    r->sreq = sreq;
    r->drain = h->port;
    int rc = PSP_RawSend(MPIDI_CH3I_port, h, 0, buf, len, &r->preq);
    if (rc) {
        rec_put(r);
        MPIR_ERR_SETANDJUMP2(mpi_errno, MPI_ERR_OTHER, "**psport_send", "**psport_send %d %s",
                             vc->pg_rank, PSP_StrError(rc));
    }
    return settle(r, NULL, 0);
fn_fail:
    return mpi_errno;
}

int MPIDI_CH3I_Send_progress(int *made)
{
    int mpi_errno = MPI_SUCCESS;
    psport_send_t *prev = NULL, *r = active_head;
    while (r) {
        if (!send_done(r)) { /* the caller just made progress */
            prev = r;
            r = r->next;
            continue;
        }
        /* Unlink first: finishing may post new sends, which go to the tail. */
        if (prev)
            prev->next = r->next;
        else
            active_head = r->next;
        if (active_tail == r)
            active_tail = prev;
        active_count--;
        *made = 1;
        int e = finish(r);
        if (e && !mpi_errno)
            mpi_errno = e;
        r = prev ? prev->next : active_head;
    }
    return mpi_errno;
}

int MPIDI_CH3I_Send_pending(void)
{
    return active_count;
}

/* ---- CH3's four send entry points ---- */

int MPIDI_CH3_iStartMsg(MPIDI_VC_t *vc, void *pkt, intptr_t pkt_sz, MPIR_Request **sreq_ptr)
{
    struct iovec iov = {pkt, (size_t)pkt_sz};
    return MPIDI_CH3I_Send(vc, NULL, &iov, 1, sreq_ptr);
}

int MPIDI_CH3_iStartMsgv(MPIDI_VC_t *vc, struct iovec *iov, int iov_n, MPIR_Request **sreq_ptr)
{
    return MPIDI_CH3I_Send(vc, NULL, iov, iov_n, sreq_ptr);
}

int MPIDI_CH3_iSend(MPIDI_VC_t *vc, MPIR_Request *sreq, void *pkt, intptr_t pkt_sz)
{
    struct iovec iov = {pkt, (size_t)pkt_sz};
    return MPIDI_CH3I_Send(vc, sreq, &iov, 1, NULL);
}

int MPIDI_CH3_iSendv(MPIDI_VC_t *vc, MPIR_Request *sreq, struct iovec *iov, int iov_n)
{
    return MPIDI_CH3I_Send(vc, sreq, iov, iov_n, NULL);
}
