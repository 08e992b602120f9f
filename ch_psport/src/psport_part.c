/*
 * psport_part.c — MPI 4.0 partitioned communication (MPI_Psend_init, MPI_Precv_init,
 * MPI_Pready, MPI_Pready_range, MPI_Pready_list, MPI_Parrived) for CH3, whose own versions
 * in MPICH 4.0.2 only assert (ch_psport/patches/partitioned.patch takes them out and lets
 * MPID_Startall and the request free hook come here).  It is built on CH3's point-to-point.
 *
 * Everything travels on the communicator's collective context with tags that have
 * MPIR_TAG_COLL_BIT set, which MPICH's collectives never use: no user receive (not even
 * MPI_ANY_SOURCE / MPI_ANY_TAG) and no collective can take it.
 *
 * Matching.  MPI pairs the n-th partitioned send of a rank with tag t with the n-th
 * partitioned receive for (that rank, t) on the communicator, in the order of the init
 * calls, once for all rounds.  MPI_Psend_init sends a handshake {tag, id}
 * (PART_TAG_INIT); every MPI_Precv_init posts one receive for a handshake from its source.
 * Handshakes from one rank arrive in its init order, and each goes to the oldest receive of
 * (source, tag) that has none yet, or waits for the next such MPI_Precv_init: the pairs MPI
 * asks for.  The id, the sender's own and unique among its partitioned sends, names the
 * pair's data messages (PART_TAG_DATA), so rounds of different pairs never mix, whatever
 * order the requests are started in.
 *
 * Rounds.  The sender sends its whole buffer as one message once every partition of the
 * round is ready; the receiver posts its receive at MPI_Start, or when the handshake comes
 * if that is later (a progress hook takes handshakes while any are due).  MPI_Parrived is
 * true for every partition once the round's data is in: the partitions arrive together.
 */
#include "mpidi_ch3_impl.h"

#include <string.h>

/* The handshake as it travels. */
typedef struct part_hs {
    int32_t tag; /* the user's tag */
    uint32_t id; /* the sender's id of the pair */
} part_hs_t;

/* A partitioned request's state (request->ch.part). */
typedef struct part {
    struct part *next; /* receive: in the list waiting for a handshake, in init order */
    MPIR_Request *req; /* the user's request; NULL once freed (a receive's handshake due) */
    MPIR_Comm *comm;   /* referenced */
    int send;          /* 1: MPI_Psend_init; 0: MPI_Precv_init */
    int peer, tag;     /* as given (peer may be MPI_PROC_NULL) */
    void *buf;         /* the whole buffer: partitions * count elements */
    MPI_Aint count;    /* elements in it */
    MPI_Datatype datatype;
    MPIR_Datatype *dt_ptr; /* a derived datatype, referenced; NULL for a builtin one */
    int partitions;
    int ready;                /* send: partitions marked ready this round */
    unsigned char *ready_map; /* send: which */
    int listed;               /* receive: in the list waiting for a handshake (not matched yet) */
    int waiting;              /* receive: started before matched; the data receive is posted then */
    uint32_t id;              /* the sender's id of the pair (receive: from the handshake) */
    MPIR_Request *hs_req;     /* send: the handshake's send, until it is done */
    part_hs_t hs;             /* send: the handshake (lives until sent) */
    MPIR_Request *data;       /* this round's data send or receive (a reference of ours) */
} part_t;

/* A handshake receive posted by MPI_Precv_init (in posting order). */
typedef struct hs_recv {
    struct hs_recv *next;
    MPIR_Request *req; /* (its comm is the communicator) */
    int source;
    part_hs_t hs;
} hs_recv_t;

/* A handshake no receive had claimed yet (its MPI_Precv_init comes later). */
typedef struct hs_kept {
    struct hs_kept *next;
    MPIR_Comm *comm; /* referenced */
    int source;
    part_hs_t hs;
} hs_kept_t;

static part_t *unmatched_head, *unmatched_tail;
static hs_recv_t *pool_head, *pool_tail;
static hs_kept_t *kept_head, *kept_tail;
static int hook_id = -1, hook_active;
static uint32_t next_id;

#define PART_TAG_INIT (MPIR_TAG_COLL_BIT | 1)

/* The tag of pair id's data: above PART_TAG_INIT, below the next bit. */
static int data_tag(uint32_t id)
{
    uint32_t span = (uint32_t)MPIR_TAG_COLL_BIT - 2u;
    return MPIR_TAG_COLL_BIT | (int)(2u + id % span);
}

static int coll_offset(const MPIR_Comm *comm)
{
    return comm->comm_kind == MPIR_COMM_KIND__INTRACOMM ? MPIR_CONTEXT_INTRA_COLL
                                                        : MPIR_CONTEXT_INTER_COLL;
}

static void part_destroy(part_t *p)
{
    if (p->dt_ptr)
        MPIR_Datatype_ptr_release(p->dt_ptr);
    MPIR_Comm_release(p->comm);
    MPL_free(p->ready_map);
    MPL_free(p);
}

/* ---- a round's data ---- */

/* The round's data operation is done: the user's request completes with its status. */
static void data_done(part_t *p)
{
    MPIR_Request *req = p->req, *d = p->data;
    req->status.MPI_ERROR = d->status.MPI_ERROR;
    if (!p->send) {
        req->status.MPI_SOURCE = d->status.MPI_SOURCE;
        req->status.MPI_TAG = p->tag;
        MPIR_STATUS_SET_COUNT(req->status, MPIR_STATUS_GET_COUNT(d->status));
        MPIR_STATUS_SET_CANCEL_BIT(req->status, FALSE);
    }
    MPID_Request_complete(req); /* drops the reference MPIDI_CH3I_Part_start added */
}

/* CH3 calls this when the data request completes (from its free hook). */
static int data_completed(MPIR_Request *d)
{
    data_done(d->ch.part);
    return MPI_SUCCESS;
}

/* The round failed before its data operation existed: complete the request with err. */
static void round_failed(part_t *p, int err)
{
    p->req->status.MPI_ERROR = err;
    MPID_Request_complete(p->req);
}

/* d is the round's data operation: finish the round now if it is done, else when it is. */
static void watch_data(part_t *p, MPIR_Request *d)
{
    p->data = d;
    d->ch.part = p;
    if (MPIR_Request_is_complete(d))
        data_done(p);
    else
        d->dev.request_completed_cb = data_completed;
}

/* Post the round's data operation: the send once every partition is ready, the receive once
 * the request is started and matched. */
static int start_data(part_t *p)
{
    MPIR_Request *d = NULL;
    p->waiting = 0;
    int tag = data_tag(p->id), offset = coll_offset(p->comm);
    int mpi_errno =
        p->send ? MPID_Isend(p->buf, p->count, p->datatype, p->peer, tag, p->comm, offset, &d)
                : MPID_Irecv(p->buf, p->count, p->datatype, p->peer, tag, p->comm, offset, &d);
    if (mpi_errno) {
        round_failed(p, mpi_errno);
        return mpi_errno;
    }
    watch_data(p, d);
    return MPI_SUCCESS;
}

/* ---- handshakes ---- */

/* Receive p gets handshake hs. */
static int match(part_t *p, const part_hs_t *hs)
{
    /* off the waiting list (p is its oldest entry of this source and tag, not always its head) */
    part_t *prev = NULL;
    for (part_t *q = unmatched_head; q && q != p; q = q->next)
        prev = q;
    if (prev)
        prev->next = p->next;
    else
        unmatched_head = p->next;
    if (unmatched_tail == p)
        unmatched_tail = prev;
    p->next = NULL;
    p->listed = 0;
    p->id = hs->id;
    if (!p->req) { /* freed before its handshake came: the pair is gone */
        part_destroy(p);
        return MPI_SUCCESS;
    }
    return p->waiting ? start_data(p) : MPI_SUCCESS;
}

/* A handshake from source on comm: to the oldest receive waiting for one, or kept. */
static int deliver(MPIR_Comm *comm, int source, const part_hs_t *hs)
{
    for (part_t *p = unmatched_head; p; p = p->next)
        if (p->comm == comm && p->peer == source && p->tag == hs->tag)
            return match(p, hs);
    hs_kept_t *k = MPL_malloc(sizeof *k, MPL_MEM_BUFFER);
    if (!k)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**nomem", 0);
    k->next = NULL;
    k->comm = comm;
    MPIR_Comm_add_ref(comm);
    k->source = source;
    k->hs = *hs;
    if (kept_tail)
        kept_tail->next = k;
    else
        kept_head = k;
    kept_tail = k;
    return MPI_SUCCESS;
}

static void hook_set(int on)
{
    if (hook_id < 0 || on == hook_active)
        return;
    if (on)
        MPIR_Progress_hook_activate(hook_id);
    else
        MPIR_Progress_hook_deactivate(hook_id);
    hook_active = on;
}

/* Take the handshakes that arrived, in the order their receives were posted (one sender's
 * arrive in its order: a receive posted earlier is matched earlier).  Also the progress hook,
 * active while handshake receives are posted. */
static int take_handshakes(int *made)
{
    int mpi_errno = MPI_SUCCESS;
    for (hs_recv_t *prev = NULL, *r = pool_head; r;) {
        if (!MPIR_Request_is_complete(r->req)) {
            prev = r;
            r = r->next;
            continue;
        }
        hs_recv_t *next = r->next;
        if (prev)
            prev->next = next;
        else
            pool_head = next;
        if (pool_tail == r)
            pool_tail = prev;
        *made = 1;
        int e = r->req->status.MPI_ERROR;
        if (!e && !MPIR_STATUS_GET_CANCEL_BIT(r->req->status))
            e = deliver(r->req->comm, r->source, &r->hs);
        if (e && !mpi_errno)
            mpi_errno = e;
        MPIR_Request_free(r->req);
        MPL_free(r);
        r = next;
    }
    hook_set(pool_head != NULL);
    return mpi_errno;
}

static int part_finalize(void *arg);

/* The hook and the clean-up at MPI_Finalize, once. */
static int setup(void)
{
    if (hook_id >= 0)
        return MPI_SUCCESS;
    int mpi_errno = MPIR_Progress_hook_register(take_handshakes, &hook_id);
    if (mpi_errno) {
        hook_id = -1;
        return mpi_errno;
    }
    MPIR_Add_finalize(part_finalize, NULL, MPIR_FINALIZE_CALLBACK_PRIO + 1);
    return MPI_SUCCESS;
}

/* Post a receive for the next handshake from source on comm. */
static int post_handshake_recv(MPIR_Comm *comm, int source)
{
    hs_recv_t *r = MPL_malloc(sizeof *r, MPL_MEM_BUFFER);
    if (!r)
        return MPIR_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, __func__, __LINE__,
                                    MPI_ERR_OTHER, "**nomem", 0);
    r->next = NULL;
    r->source = source;
    r->req = NULL;
    int mpi_errno = MPID_Irecv(&r->hs, sizeof r->hs, MPI_BYTE, source, PART_TAG_INIT, comm,
                               coll_offset(comm), &r->req);
    if (mpi_errno) {
        MPL_free(r);
        return mpi_errno;
    }
    if (pool_tail)
        pool_tail->next = r;
    else
        pool_head = r;
    pool_tail = r;
    hook_set(1);
    return MPI_SUCCESS;
}

static int part_finalize(void *arg)
{
    (void)arg;
    int made = 0;
    take_handshakes(&made);
    for (hs_recv_t *r = pool_head, *next; r; r = next) { /* no handshake is coming any more */
        next = r->next;
        MPID_Cancel_recv(r->req);
        MPIR_Request_free(r->req);
        MPL_free(r);
    }
    pool_head = pool_tail = NULL;
    for (hs_kept_t *k = kept_head, *next; k; k = next) {
        next = k->next;
        MPIR_Comm_release(k->comm);
        MPL_free(k);
    }
    kept_head = kept_tail = NULL;
    for (part_t *p = unmatched_head, *next; p; p = next) { /* only freed ones are ours */
        next = p->next;
        p->next = NULL;
        if (!p->req)
            part_destroy(p);
    }
    unmatched_head = unmatched_tail = NULL;
    if (hook_id >= 0) {
        hook_set(0);
        MPIR_Progress_hook_deregister(hook_id);
        hook_id = -1;
    }
    return MPI_SUCCESS;
}

/* ---- MPI's calls ---- */

static int part_new(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int peer,
                    int tag, MPIR_Comm *comm, int send, MPIR_Request **request)
{
    int mpi_errno = MPI_SUCCESS;
    *request = NULL;
    MPIR_ERR_CHKANDJUMP(partitions < 1 || count < 0 ||
                            count > (MPI_Count)MPIR_AINT_MAX / partitions,
                        mpi_errno, MPI_ERR_COUNT, "**count");
    part_t *p = MPL_calloc(1, sizeof *p, MPL_MEM_BUFFER);
    MPIR_ERR_CHKANDJUMP(p == NULL, mpi_errno, MPI_ERR_OTHER, "**nomem");
    if (send && !(p->ready_map = MPL_calloc((size_t)partitions, 1, MPL_MEM_BUFFER))) {
        MPL_free(p);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomem");
    }
    MPIR_Request *req =
        MPIR_Request_create(send ? MPIR_REQUEST_KIND__PART_SEND : MPIR_REQUEST_KIND__PART_RECV);
    if (!req) {
        MPL_free(p->ready_map);
        MPL_free(p);
        MPIR_ERR_SETANDJUMP(mpi_errno, MPI_ERR_OTHER, "**nomemreq");
    }
    MPIR_Object_set_ref(req, 1);
    MPIR_cc_set(&req->cc, 0);
    req->comm = comm;
    MPIR_Comm_add_ref(comm);
    req->u.part.partitions = partitions;
    MPIR_Part_request_inactivate(req);
    req->dev.match.parts.rank = peer;
    req->dev.match.parts.tag = tag;
    req->ch.part = p;

    p->req = req;
    p->comm = comm;
    MPIR_Comm_add_ref(comm);
    p->send = send;
    p->peer = peer;
    p->tag = tag;
    p->buf = buf;
    p->count = (MPI_Aint)((MPI_Count)partitions * count);
    p->datatype = datatype;
    if (!HANDLE_IS_BUILTIN(datatype)) {
        MPIR_Datatype_get_ptr(datatype, p->dt_ptr);
        MPIR_Datatype_ptr_add_ref(p->dt_ptr);
    }
    p->partitions = partitions;
    *request = req;
fn_fail:
    return mpi_errno;
}

int MPID_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype,
                    int dest, int tag, MPIR_Comm *comm, MPIR_Info *info, MPIR_Request **request)
{
    (void)info;
    int mpi_errno = part_new((void *)buf, partitions, count, datatype, dest, tag, comm, 1, request);
    if (mpi_errno || dest == MPI_PROC_NULL)
        return mpi_errno;
    part_t *p = (*request)->ch.part;
    p->id = next_id++;
    p->hs = (part_hs_t){tag, p->id};
    mpi_errno = MPID_Isend(&p->hs, sizeof p->hs, MPI_BYTE, dest, PART_TAG_INIT, comm,
                           coll_offset(comm), &p->hs_req);
    if (mpi_errno) {
        p->hs_req = NULL;
        MPIDI_CH3I_Part_free(*request);
        MPIR_Request_free(*request);
        *request = NULL;
        return mpi_errno;
    }
    if (MPIR_Request_is_complete(p->hs_req)) {
        MPIR_Request_free(p->hs_req);
        p->hs_req = NULL;
    }
    return MPI_SUCCESS;
}

int MPID_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int source,
                    int tag, MPIR_Comm *comm, MPIR_Info *info, MPIR_Request **request)
{
    (void)info;
    int mpi_errno = part_new(buf, partitions, count, datatype, source, tag, comm, 0, request);
    if (mpi_errno || source == MPI_PROC_NULL)
        return mpi_errno;
    part_t *p = (*request)->ch.part;
    if ((mpi_errno = setup()) || (mpi_errno = post_handshake_recv(comm, source))) {
        MPIDI_CH3I_Part_free(*request);
        MPIR_Request_free(*request);
        *request = NULL;
        return mpi_errno;
    }
    if (unmatched_tail)
        unmatched_tail->next = p;
    else
        unmatched_head = p;
    unmatched_tail = p;
    p->listed = 1;
    /* a handshake that came first is this receive's (an older receive of this source and tag
     * would have taken it) */
    for (hs_kept_t *prev = NULL, *k = kept_head; k; prev = k, k = k->next) {
        if (k->comm != comm || k->source != source || k->hs.tag != tag)
            continue;
        if (prev)
            prev->next = k->next;
        else
            kept_head = k->next;
        if (kept_tail == k)
            kept_tail = prev;
        mpi_errno = match(p, &k->hs);
        MPIR_Comm_release(k->comm);
        MPL_free(k);
        break;
    }
    return mpi_errno;
}

int MPIDI_CH3I_Part_start(MPIR_Request *req)
{
    part_t *p = req->ch.part;
    MPIR_Part_request_activate(req);
    if (p->data) { /* the last round's, done */
        p->data->ch.part = NULL;
        MPIR_Request_free(p->data);
        p->data = NULL;
    }
    req->status.MPI_ERROR = MPI_SUCCESS;
    req->cc_ptr = &req->cc;
    if (p->peer == MPI_PROC_NULL) {
        MPIR_Status_set_procnull(&req->status);
        MPIR_cc_set(&req->cc, 0);
        return MPI_SUCCESS;
    }
    MPIR_cc_set(&req->cc, 1);
    MPIR_Request_add_ref(req); /* the round's completion drops it */
    if (p->send) {
        p->ready = 0;
        memset(p->ready_map, 0, (size_t)p->partitions);
        return MPI_SUCCESS;
    }
    int made = 0;
    int mpi_errno = take_handshakes(&made);
    if (mpi_errno)
        return mpi_errno;
    if (!p->listed)
        return start_data(p);
    p->waiting = 1; /* posted when the handshake comes (the hook is on while it is due) */
    return MPI_SUCCESS;
}

/* Partition i of send request p is ready; the data goes when all are. */
static int mark_ready(part_t *p, int i)
{
    if (p->ready_map[i])
        return MPI_SUCCESS;
    p->ready_map[i] = 1;
    if (++p->ready < p->partitions || p->peer == MPI_PROC_NULL)
        return MPI_SUCCESS;
    return start_data(p);
}

int MPID_Pready_range(int partition_low, int partition_high, MPIR_Request *sreq)
{
    part_t *p = sreq->ch.part;
    int mpi_errno = MPI_SUCCESS;
    for (int i = partition_low; i <= partition_high && !mpi_errno; i++)
        mpi_errno = mark_ready(p, i);
    return mpi_errno;
}

int MPID_Pready_list(int length, int array_of_partitions[], MPIR_Request *sreq)
{
    part_t *p = sreq->ch.part;
    int mpi_errno = MPI_SUCCESS;
    for (int i = 0; i < length && !mpi_errno; i++)
        mpi_errno = mark_ready(p, array_of_partitions[i]);
    return mpi_errno;
}

int MPID_Parrived(MPIR_Request *rreq, int partition, int *flag)
{
    (void)partition; /* the partitions arrive together */
    int mpi_errno = MPI_SUCCESS;
    if (!MPIR_Request_is_complete(rreq))
        mpi_errno = MPID_Progress_test(NULL);
    *flag = MPIR_Request_is_complete(rreq);
    return mpi_errno;
}

/* Wait until CH3 request r is complete (a free must not leave buffers in use). */
static void wait_done(MPIR_Request *r)
{
    MPID_Progress_state st;
    MPID_Progress_start(&st);
    while (!MPIR_Request_is_complete(r))
        if (MPID_Progress_wait(&st) != MPI_SUCCESS)
            break;
    MPID_Progress_end(&st);
}

void MPIDI_CH3I_Part_free(MPIR_Request *req)
{
    part_t *p = req->ch.part;
    if (!p)
        return;
    req->ch.part = NULL;
    if (MPIR_Part_request_is_active(req) && !MPIR_Request_is_complete(req)) {
        /* Freed in a round: finish what went out, drop what did not. */
        if (p->data && !p->send)
            MPID_Cancel_recv(p->data);
        if (p->data)
            wait_done(p->data);
        else
            MPID_Request_complete(req); /* no data went: the round's reference */
        p->waiting = 0;
    }
    p->req = NULL;
    if (p->data) {
        p->data->ch.part = NULL;
        p->data->dev.request_completed_cb = NULL;
        MPIR_Request_free(p->data);
        p->data = NULL;
    }
    if (p->hs_req) { /* the handshake's buffer is p's */
        wait_done(p->hs_req);
        MPIR_Request_free(p->hs_req);
        p->hs_req = NULL;
    }
    if (p->listed)
        return; /* stays listed: its handshake, when it comes, ends the pair */
    part_destroy(p);
}
