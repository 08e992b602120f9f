/*
 * port.c — ports and port-D messages of a process: open/close, sends (fragmented to the NIC,
 * or local through the area, large local ones copied once by the reader with
 * process_vm_readv), receives with an accept callback, the progress engine and waiting.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"
#include "lring.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "psk_dev.h"
#include "pulc_int.h"
#include "settings.h"
#include "wakefence.h"

static struct pulc_proc proc;
static int proc_ready;

struct pulc_proc *pulc_proc(int *err)
{
    if (proc_ready && pulc_hal_self()->ctx >= 0)
        return &proc;
    int rc = PSP_Init();
    if (rc) {
        *err = rc;
        return NULL;
    }
    struct pulc_hal *h = pulc_hal_self();
    uint64_t direct, ring_max, tx_at_post;
    char msg[256];
    if (psp_setting_u64("PSP_LOCAL_DIRECT", 0, UINT32_MAX, &direct, msg, sizeof msg) ||
        psp_setting_u64("PSP_LOCAL_RING_MAX", 0, UINT32_MAX, &ring_max, msg, sizeof msg) ||
        psp_setting_u64("PSP_TX_AT_POST", 0, 1, &tx_at_post, msg, sizeof msg)) {
        PSP_ERROR("%s", msg);
        *err = -EINVAL;
        return NULL;
    }
    memset(&proc, 0, sizeof proc);
    proc.h = h;
    proc.node.area = h->area;
    proc.node.img = h->img;
    proc.node.ctx = h->ctx;
    proc.node.node_id = (uint16_t)h->info.node_id;
    proc.node.pid = (int32_t)getpid();
    if (h->kernel) {
        proc.node.settle = pulc_dev_settle;
        proc.node.dev_fd = h->dev;
        proc.node.ring_lock = &h->ring_lock;
    }
    proc.local_direct = (uint32_t)direct;
    proc.tx_at_post = (int)tx_at_post;
    uint32_t fits = pulc_ring_max(h->area);
    proc.ring_max = ring_max < fits ? (uint32_t)ring_max : fits;
    proc.light_fence = pulc_wakefence_register();
    proc_ready = 1;
    return &proc;
}

/* ---- ports ---- */

int PSP_OpenPort(int number, int kind, PSP_Port **out)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    struct pulc_area *a = P->node.area;
    if (kind != PSP_PORT_D && kind != PSP_PORT_S && kind != PSP_PORT_M)
        return -EINVAL;
    if (number < 0 || (uint32_t)number >= a->cfg.ports)
        return -EINVAL;
    PSP_Port *port = calloc(1, sizeof *port);
    if (!port)
        return -ENOMEM;
    int rc = pulc_area_lock(a);
    if (rc) {
        free(port);
        return rc;
    }
    uint32_t idx = 0;
    if (number == PSP_ANYPORT) {
        for (uint32_t k = 0; k < a->cfg.ports - 1 && !idx; k++) {
            uint32_t c = 1 + (a->next_port - 1 + k) % (a->cfg.ports - 1);
            if (pulc_port_at(a, c)->state == PULC_PORT_FREE)
                idx = c;
        }
        rc = idx ? 0 : -ENOSPC;
        if (idx) /* round robin, so a closed port's number is not reused at once */
            a->next_port = idx % (a->cfg.ports - 1) + 1;
    } else {
        idx = (uint32_t)number;
        rc = pulc_port_at(a, idx)->state == PULC_PORT_FREE ? 0 : -EADDRINUSE;
    }
    if (!rc) {
        struct pulc_port *pt = pulc_port_at(a, idx);
        pt->kind = (uint32_t)kind;
        pt->owner_pid = P->node.pid;
        pt->error = 0;
        pt->qhead = pt->qtail = pt->last_open = PULC_NONE;
        pt->qlen = 0;
        pt->msgs_in = pt->bytes_in = pt->msgs_out = pt->bytes_out = 0;
        __atomic_store_n(&pt->state, PULC_PORT_OPEN, __ATOMIC_RELEASE);
        port->idx = idx;
        port->kind = (uint32_t)kind;
        port->gen = pt->generation;
        port->seen_event = pt->event - 1; /* look at the queue on the first progress */
        port->moved_mark = pt->event;
        port->rx_rings_gen = pt->rings_gen;
    }
    pulc_area_unlock(a);
    if (rc) {
        free(port);
        return rc;
    }
    port->next = P->ports;
    P->ports = port;
    *out = port;
    return 0;
}

PSP_PortId PSP_GetPortId(const PSP_Port *port)
{
    return PSP_PORTID(proc.node.node_id, port->idx);
}

int PSP_GetPortError(PSP_Port *port, PSP_PortId *about)
{
    struct pulc_port *pt = pulc_port_at(proc.node.area, port->idx);
    /* a look first: the exchange writes the port's line, which senders to this port read
     * (sleepers) and MPI's progress asks every 64th pass */
    if (!__atomic_load_n(&pt->error, __ATOMIC_ACQUIRE)) {
        if (about)
            *about = 0;
        return 0;
    }
    int e = __atomic_exchange_n(&pt->error, 0, __ATOMIC_ACQ_REL);
    if (about)
        *about = e ? pt->error_src : 0;
    return e;
}

static void cancel_list(PSP_Request **head, PSP_Request **tail, PSP_Port *port)
{
    for (PSP_Request *r = *head, *next; r; r = next) {
        next = r->p_next;
        if (r->p_port == port) {
            rq_remove(head, tail, r);
            rq_complete(r, -ECANCELED);
        }
    }
}

int PSP_ClosePort(PSP_Port *port)
{
    struct pulc_proc *P = &proc;
    struct pulc_area *a = P->node.area;
    /* Local direct sends of this port wait for their readers first (their buffers are read). */
    for (PSP_Request *r = P->lsend_head; r; r = r->p_next)
        if (r->p_port == port && r->p_state == PULC_RQ_SEND_DIRECT)
            PSP_Wait(r, -1);
    cancel_list(&P->rsend_head, &P->rsend_tail, port);
    cancel_list(&P->lsend_head, &P->lsend_tail, port);
    cancel_list(&port->rq_head, &port->rq_tail, port);
    int rc = pulc_area_lock(a);
    if (rc)
        return rc;
    struct pulc_port *pt = pulc_port_at(a, port->idx);
    if (pt->state == PULC_PORT_OPEN && pt->generation == port->gen)
        pulc_port_close_locked(a, port->idx);
    pulc_area_unlock(a);
    for (PSP_Port **pp = &P->ports; *pp; pp = &(*pp)->next)
        if (*pp == port) {
            *pp = port->next;
            break;
        }
    pulc_local_forget(port);
    free(port->stream);
    free(port);
    return 0;
}

/* ---- sending ---- */

static int help_copy(struct pulc_area *a, PSP_Request *r);

/* Post as many fragments of a remote send as the context's ring takes; 1 when all are.  The
 * caller holds the ring lock if there is one (post_remote). */
static int post_remote_locked(struct pulc_proc *P, PSP_Request *r)
{
    struct mcp_image *img = P->node.img;
    unsigned ctx = (unsigned)P->node.ctx;
    uint32_t maxp = mcp_max_payload(img);
    uint16_t node = PSP_PORTID_NODE(r->p_dest);
    uint32_t cookie = r->p_port->idx << 16 | (r->p_msg_id & 0xffffu);
    do {
        uint32_t slot;
        uint8_t *b = mcp_send_slot(img, ctx, &slot);
        if (!b)
            return 0;
        int raw = r->p_kind == PULC_PROTO_RAW;
        int first = r->p_msg == 0 && !raw; /* p_msg counts fragments posted */
        uint32_t room = maxp - PULC_HDR_LEN - (first ? r->xlen : 0u);
        uint32_t n = r->len - r->p_off < room ? r->len - r->p_off : room;
        /* rawdata: msg_id names the registration, offset is within its buffer (from
         * p_xmax), total carries the registration's nonce (p_buflen) */
        struct pulc_hdr hd = {(uint8_t)r->p_kind,
                              (uint8_t)(first ? PULC_HF_FIRST : 0),
                              (uint16_t)r->p_port->idx,
                              PSP_PORTID_NUMBER(r->p_dest),
                              first ? r->xlen : 0,
                              r->p_msg_id,
                              raw ? r->p_xmax + r->p_off : r->p_off,
                              raw ? r->p_buflen : r->len};
        pulc_hdr_put(b, &hd);
        uint32_t at = PULC_HDR_LEN;
        if (first && r->xlen) {
            memcpy(b + at, r->p_xhdr, r->xlen);
            at += r->xlen;
        }
        /* the frame CRC's payload part is taken in the copy (mcp_send_post_crc): the bytes
         * are read once, where a copy and the firmware's CRC after it read them twice */
        uint32_t crc = mcp_crc32c(0, b, at);
        crc = mcp_crc32c_copy(crc, b + at, (const uint8_t *)r->p_sbuf + r->p_off, n);
        mcp_send_post_crc(img, ctx, slot, node, at + n, cookie, crc);
        r->p_off += n;
        r->p_msg++;
        if (first && r->p_off < r->len) { /* half sent from here: psid aborts it if we die */
            struct pulc_port *pt = pulc_port_at(P->node.area, r->p_port->idx);
            pt->tx_open_dest = r->p_dest;
            pt->tx_open_msg_id = r->p_msg_id;
            __atomic_store_n(&pt->tx_open, 1u, __ATOMIC_RELEASE);
        }
    } while (r->p_off < r->len);
    if (r->p_kind != PULC_PROTO_RAW && r->p_msg > 1)
        __atomic_store_n(&pulc_port_at(P->node.area, r->p_port->idx)->tx_open, 0u,
                         __ATOMIC_RELEASE);
    return 1;
}

/* post_remote_locked() under the ring lock (the kernel provider's drainer thread posts too). */
static int post_remote(struct pulc_proc *P, PSP_Request *r)
{
    if (!P->node.ring_lock)
        return post_remote_locked(P, r);
    pthread_mutex_lock(P->node.ring_lock);
    int rc = post_remote_locked(P, r);
    pthread_mutex_unlock(P->node.ring_lock);
    return rc;
}

/*
 * Try a local send under the area lock: 1 done (or DIRECT queued), 0 no room yet, or a
 * negative errno (the port is gone).  With a local ring to the port the message is queued
 * hidden and a ticket in the ring shows it to the receiver in its turn (lring.h) — unless
 * the ring is empty: then everything sent before is in the queue or taken, and the message
 * is queued visible, counted in the ring's pending so later ring messages wait for it.
 */
static int try_local(struct pulc_proc *P, PSP_Request *r, uint32_t ring, uint64_t *tail_seen)
{
    struct pulc_area *a = P->node.area;
    uint32_t num = PSP_PORTID_NUMBER(r->p_dest);
    struct pulc_port *pt = pulc_port_at(a, num);
    if (pt->state != PULC_PORT_OPEN)
        return -ECONNREFUSED;
    if (pt->kind != r->p_kind)
        return -EPROTOTYPE;
    int direct = r->len > P->local_direct;
    uint32_t need = direct ? 0 : pulc_frags_needed(a, r->len, r->len);
    if (a->msgs_free == 0 || a->frags_free < need)
        return 0;
    int ticket = 0;
    if (ring != PULC_NONE) {
        struct pulc_ring *rg = pulc_ring_at(a, ring);
        if (*tail_seen != rg->head) /* our copy says "not empty": look at the reader's */
            *tail_seen = __atomic_load_n(&rg->tail, __ATOMIC_ACQUIRE);
        ticket = *tail_seen != rg->head;
        if (ticket && !pulc_ring_room(a, ring, tail_seen, pulc_rent_size(0, 0)))
            return 0;
    }
    uint32_t i = pulc_msg_alloc(a);
    struct pulc_msg *m = pulc_msg_at(a, i);
    m->src = PSP_GetPortId(r->p_port);
    m->msg_id = r->p_msg_id;
    m->total = r->len;
    m->xlen = r->xlen;
    m->proto = (uint8_t)r->p_kind;
    if (r->xlen)
        memcpy(m->xhdr, r->p_xhdr, r->xlen);
    if (direct) {
        m->flags = PULC_MSG_DIRECT;
        m->direct_pid = P->node.pid;
        m->direct_addr = (uint64_t)(uintptr_t)r->p_sbuf;
        m->received = r->len;
        r->p_msg = i;
        a->local_direct++;
    } else if (pulc_msg_append(a, i, r->p_sbuf, r->len, UINT64_MAX)) {
        pulc_msg_free(a, i); /* cannot happen: room checked above */
        return 0;
    }
    if (ring != PULC_NONE) {
        m->flags |= PULC_MSG_RING | (ticket ? PULC_MSG_HIDDEN : 0);
        m->ring = ring;
        if (!ticket) /* under the area lock, published with the ring's next head */
            pulc_ring_at(a, ring)->pending++;
    }
    pulc_msg_enqueue(a, num, i);
    if (ticket)
        pulc_ring_put(a, ring, tail_seen, PULC_RENT_TICKET, r->p_msg_id, NULL, 0, NULL, 0, i);
    pt->bytes_in += r->len;
    a->local_msgs++;
    return 1;
}

/* Local sends in order: start those that have room; finish direct ones their reader did. */
static void progress_local(struct pulc_proc *P)
{
    struct pulc_area *a = P->node.area;
    int locked = 0;
    for (PSP_Request *r = P->lsend_head, *next; r; r = next) {
        next = r->p_next;
        if (r->p_state == PULC_RQ_SEND_DIRECT) {
            struct pulc_msg *m = pulc_msg_at(a, r->p_msg);
            if (!locked)
                help_copy(a, r);
            uint32_t done = __atomic_load_n(&m->done, __ATOMIC_ACQUIRE);
            if (!done)
                continue;
            if (!locked && pulc_area_lock(a) == 0)
                locked = 1;
            int e = done == 1 ? 0 : m->direct_err;
            if (m->state == PULC_MSG_DIRECT_DONE)
                pulc_msg_free(a, r->p_msg);
            rq_remove(&P->lsend_head, &P->lsend_tail, r);
            rq_complete(r, e);
            continue;
        }
        int rc = pulc_local_send(P, r, &locked, try_local);
        if (rc == 0)
            break; /* keep the order: later ones wait too */
        if (rc < 0 || rc == 2) {
            rq_remove(&P->lsend_head, &P->lsend_tail, r);
            rq_complete(r, rc < 0 ? rc : 0);
        } else if (r->len > P->local_direct) {
            r->p_state = PULC_RQ_SEND_DIRECT;
            pulc_port_wake(a, PSP_PORTID_NUMBER(r->p_dest));
        } else {
            rq_remove(&P->lsend_head, &P->lsend_tail, r);
            rq_complete(r, 0);
            pulc_port_wake(a, PSP_PORTID_NUMBER(r->p_dest));
        }
    }
    if (locked)
        pulc_area_unlock(a);
}

int pulc_send_start(struct pulc_proc *P, PSP_Port *port, unsigned proto, PSP_PortId dest,
                    const void *xheader, uint16_t xlen, const void *buf, uint32_t len,
                    PSP_Request *req)
{
    if (xlen > PULC_XHDR_MAX || (xlen && !xheader) || (len && !buf))
        return -EINVAL;
    uint16_t node = PSP_PORTID_NODE(dest);
    const struct psp_nodes *nodes = &P->node.area->nodes;
    if (node >= nodes->count || !nodes->node[node].present)
        return -EHOSTUNREACH;
    uint32_t num = PSP_PORTID_NUMBER(dest);
    if (num == 0 || num >= P->node.area->cfg.ports)
        return -ECONNREFUSED;
    rq_clear(req);
    req->len = len;
    req->xlen = xlen;
    req->p_kind = (uint16_t)proto;
    req->p_port = port;
    req->p_sbuf = buf;
    req->p_xhdr = xheader;
    req->p_dest = dest;
    req->p_msg_id = port->next_msg_id++;
    pulc_port_at(P->node.area, port->idx)->msgs_out++;
    pulc_port_at(P->node.area, port->idx)->bytes_out += len;

    if (node != P->node.node_id) {
        pulc_send_queue_remote(P, req);
        return 0;
    }

    /* Local: errors about the destination port are known now. */
    req->p_state = PULC_RQ_SEND_LOCAL;
    if (P->lsend_head) {
        rq_append(&P->lsend_head, &P->lsend_tail, req);
        return 0;
    }
    struct pulc_area *a = P->node.area;
    int locked = 0;
    int rc = pulc_local_send(P, req, &locked, try_local);
    if (locked)
        pulc_area_unlock(a);
    if (rc < 0) {
        req->p_state = PULC_RQ_DONE;
        req->error = rc;
        return rc;
    }
    if (rc == 2) { /* through the ring: complete, receiver woken if asleep */
        rq_complete(req, 0);
        return 0;
    }
    if (rc > 0)
        pulc_port_wake(a, num);
    if (rc > 0 && len <= P->local_direct) {
        rq_complete(req, 0);
        return 0;
    }
    if (rc > 0)
        req->p_state = PULC_RQ_SEND_DIRECT;
    rq_append(&P->lsend_head, &P->lsend_tail, req);
    return 0;
}

/*
 * User provider: a send to node dst completed with `posted` frames just posted; frames behind
 * the peer's window go out only as ACKs come back, and its sender may not call progress again
 * for a long time, so if psid's NIC thread naps long, wake it to run the firmware should we
 * stop.  (Frames the window lets go leave at the post when remote_posted() sends them, else
 * at our next pass, or psid's after PSP_NIC_IDLE_US.)
 */
static void tx_handoff(struct pulc_proc *P, uint16_t dst, uint32_t posted)
{
    if (mcp_tx_blocked(P->node.img, dst, posted))
        pulc_nic_nudge(P->node.area, 0);
}

/*
 * A remote send is posted whole and completes now.  Kernel provider: ring the doorbell now
 * (the module's idle thread ticks only every 100 ms; an error here shows again at the next
 * progress pass's kick).  User provider: at_post (see pulc_send_queue_remote) -> run the
 * firmware's sending half now (and note the time, `now`, for the next post's burst rule), if the
 * NIC lock is free: what the window lets go leaves now, not at the caller's next pass (an MPI_Send
 * returns, and MPI_Recv reaches its first pass only after CH3's matching and posting).  Then
 * tx_handoff() for what is left.
 */
static void remote_posted(struct pulc_proc *P, const PSP_Request *req, int at_post, uint64_t now)
{
    uint16_t dst = PSP_PORTID_NODE(req->p_dest);
    if (P->h->kernel) {
        (void)pulc_hal_kick(P->h);
        return;
    }
    if (at_post && pulc_nic_send_try(P->node.area, &P->h->nic) > 0) {
        P->at_post_ns = now;
        tx_handoff(P, dst, 0); /* taken: only what the window holds back is left */
        return;
    }
    tx_handoff(P, dst, req->p_msg);
}

/*
 * Post a remote send (PSP_ISend, streams, rawdata) or queue it behind earlier ones.  It is
 * sent at its post (PSP_TX_AT_POST, user provider) when the way to the node was idle before
 * (nothing queued, nothing unacknowledged: a ping-pong's turn, or the first message after a
 * pause once its last ACK was taken) and no post sent at once within PULC_AT_POST_BURST_NS
 * with no progress pass since; otherwise it waits for that pass, so a stream, or a
 * burst to many nodes, still goes out many frames to one sendmmsg (sending at every post cost
 * osu_bw 5-15 %).  The time bound matters where sends come without progress between them
 * (MPI_Send, computation, MPI_Send): each of those is a burst of its own.
 */
void pulc_send_queue_remote(struct pulc_proc *P, PSP_Request *req)
{
    uint64_t now = mcp_now_ns();
    P->remote_ns = now;
    P->nic_busy = 1;
    req->p_state = PULC_RQ_SEND_REMOTE;
    if (!P->rsend_head) {
        int burst = P->at_post_ns && now - P->at_post_ns < PULC_AT_POST_BURST_NS;
        int at_post = P->tx_at_post && !P->h->kernel && !burst &&
                      mcp_tx_idle(P->node.img, (unsigned)P->node.ctx, PSP_PORTID_NODE(req->p_dest));
        if (post_remote(P, req)) {
            remote_posted(P, req, at_post, now);
            rq_complete(req, 0);
            return;
        }
    }
    rq_append(&P->rsend_head, &P->rsend_tail, req);
}

int PSP_ISend(PSP_Port *port, PSP_PortId dest, const void *xheader, uint16_t xlen, const void *buf,
              uint32_t len, PSP_Request *req)
{
    if (port->kind != PSP_PORT_D)
        return -EPROTOTYPE;
    return pulc_send_start(&proc, port, PULC_PROTO_D, dest, xheader, xlen, buf, len, req);
}

int PSP_SendNow(PSP_Port *port, PSP_PortId dest, const void *xheader, uint16_t xlen,
                const void *buf, uint32_t len)
{
    struct pulc_proc *P = &proc;
    uint32_t num = PSP_PORTID_NUMBER(dest);
    /* Anything unusual goes the usual way, which also reports the errors. */
    if (port->kind != PSP_PORT_D || PSP_PORTID_NODE(dest) != P->node.node_id || P->lsend_head ||
        (uint32_t)xlen + len > P->ring_max || xlen > PULC_XHDR_MAX || (xlen && !xheader) ||
        (len && !buf) || num == 0 || num >= P->node.area->cfg.ports)
        return 0;
    if (!pulc_local_send_now(P, port, dest, port->next_msg_id, xheader, xlen, buf, len))
        return 0;
    port->next_msg_id++;
    struct pulc_port *pt = pulc_port_at(P->node.area, port->idx);
    pt->msgs_out++;
    pt->bytes_out += len;
    return 1;
}

/* A send the NIC could not deliver: fail its request if it is still ours, else the port's. */
static void send_failed(struct pulc_proc *P, const struct mcp_send_error *e)
{
    if (e->cookie == UINT32_MAX)
        return; /* an error notice we sent */
    uint32_t idx = e->cookie >> 16, id = e->cookie & 0xffffu;
    for (PSP_Request *r = P->rsend_head; r; r = r->p_next)
        if (r->p_port->idx == idx && (r->p_msg_id & 0xffffu) == id) {
            rq_remove(&P->rsend_head, &P->rsend_tail, r);
            rq_complete(r, e->error);
            return;
        }
    if (idx < P->node.area->cfg.ports) {
        struct pulc_port *pt = pulc_port_at(P->node.area, idx);
        if (pt->state == PULC_PORT_OPEN && pt->owner_pid == P->node.pid) {
            pt->error_src = PSP_PORTID(e->dst, 0);
            pt->error_msg_id = id;
            __atomic_store_n(&pt->error, (int32_t)e->error, __ATOMIC_RELEASE);
            pulc_port_wake(P->node.area, idx);
        }
    }
}

/* ---- receiving ---- */

/* Append a posted receive to its port's list. */
static void recv_post(PSP_Port *port, PSP_Request *req)
{
    rq_append(&port->rq_head, &port->rq_tail, req);
    /* Examine the queue at the next progress only if something is queued: a sender bumps
     * the event after queuing, so an empty queue seen after reading the event is enough
     * (and taking the area lock for nothing would collide with the sender's). */
    struct pulc_port *pt = pulc_port_at(pulc_hal_self()->area, port->idx);
    uint32_t ev = __atomic_load_n(&pt->event, __ATOMIC_ACQUIRE);
    port->seen_event = __atomic_load_n(&pt->qhead, __ATOMIC_ACQUIRE) != PULC_NONE ? ev - 1 : ev;
}

int PSP_IReceive(PSP_Port *port, void *xbuf, uint16_t xmax, void *buf, uint32_t len,
                 PSP_AcceptFn accept, void *arg, PSP_Request *req)
{
    if ((len && !buf) || (xmax && !xbuf))
        return -EINVAL;
    if (port->kind != PSP_PORT_D)
        return -EPROTOTYPE;
    recv_init(req, port, xbuf, xmax, buf, len);
    req->p_accept = accept;
    req->p_arg = arg;
    recv_post(port, req);
    return 0;
}

int PSP_IReceiveEach(PSP_Port *port, PSP_PlaceFn place, void *arg, PSP_Request *req)
{
    if (!place)
        return -EINVAL;
    if (port->kind != PSP_PORT_D)
        return -EPROTOTYPE;
    recv_init(req, port, NULL, 0, NULL, 0);
    req->p_place = place;
    req->p_arg = arg;
    recv_post(port, req);
    return 0;
}

static int take(struct pulc_area *a, PSP_Request *r);

/* A standing receive r placed a message in to (matched): take it now if it is all here,
 * else put to before r, where progress_port finishes it (caller holds the area lock). */
static void placed(struct pulc_area *a, PSP_Port *port, PSP_Request *r, PSP_Request *to)
{
    struct pulc_msg *m = pulc_msg_at(a, to->p_msg);
    if (!(m->flags & PULC_MSG_DIRECT)) {
        int t = take(a, to);
        if (t) {
            rq_complete(to, t < 0 ? -ECONNRESET : (to->len > to->p_buflen ? -EMSGSIZE : 0));
            return;
        }
    }
    to->p_next = r;
    to->p_prev = r->p_prev;
    if (r->p_prev)
        r->p_prev->p_next = to;
    else
        port->rq_head = to;
    r->p_prev = to;
    port->seen_event--; /* behind the loop in progress_port: look again at the next pass */
}

/* Offer queued messages to a posted receive (caller holds the area lock): 1 matched.  A
 * standing receive (PSP_IReceiveEach) places what it takes in requests of its caller's and
 * never matches itself. */
static int match(struct pulc_area *a, PSP_Port *port, PSP_Request *r)
{
    struct pulc_port *pt = pulc_port_at(a, port->idx);
    for (uint32_t i = pt->qhead, next; i != PULC_NONE; i = next) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        next = m->next;
        if (m->flags & (PULC_MSG_CLAIMED | PULC_MSG_HIDDEN))
            continue;
        if (m->flags & PULC_MSG_ABORTED) { /* never completes and nobody took it: drop */
            pulc_msg_unlink(a, i);
            pulc_msg_free(a, i);
            continue;
        }
        PSP_MsgInfo info = {m->src, m->total, m->xlen, m->xhdr, NULL}; /* data: not at hand */
        PSP_Request *to = rq_offer(r, port, &info);
        if (!to)
            continue;
        if (!(m->flags & PULC_MSG_DIRECT)) {
            /* Destination known: when we drain the rest of it ourselves, it goes straight
             * into the buffer (proto.c) instead of through fragments. */
            m->recv_pid = proc.node.pid;
            m->recv_addr = (uint64_t)(uintptr_t)to->p_rbuf;
            m->recv_len = to->p_buflen;
        }
        m->flags |= PULC_MSG_CLAIMED;
        pulc_ring_unpend(a, m); /* later messages of its ring may be taken at once again */
        if (pt->last_open == i && (m->flags & PULC_MSG_DIRECT))
            pt->last_open = PULC_NONE;
        to->p_msg = i;
        to->src = m->src;
        to->len = m->total;
        to->xlen = m->xlen;
        if (to->p_xmax)
            memcpy(to->p_xbuf, m->xhdr, m->xlen < to->p_xmax ? m->xlen : to->p_xmax);
        to->p_state = PULC_RQ_RECV_MATCHED;
        if (to == r)
            return 1;
        placed(a, port, r, to);
    }
    return 0;
}

/* Take what arrived of a matched message (caller holds the area lock): 1 when complete. */
static int take(struct pulc_area *a, PSP_Request *r)
{
    struct pulc_msg *m = pulc_msg_at(a, r->p_msg);
    if (m->taken < r->p_buflen)
        pulc_msg_read(a, r->p_msg, (uint8_t *)r->p_rbuf + m->taken, r->p_buflen - m->taken);
    if (m->taken >= r->p_buflen)
        pulc_msg_read(a, r->p_msg, NULL, UINT32_MAX); /* truncated: the rest is dropped */
    if (m->taken == m->total) {
        r->copied = m->total < r->p_buflen ? m->total : r->p_buflen;
        pulc_msg_unlink(a, r->p_msg);
        pulc_msg_free(a, r->p_msg);
        return 1;
    }
    if (m->flags & PULC_MSG_ABORTED) {
        r->copied = m->taken < r->p_buflen ? m->taken : r->p_buflen;
        pulc_msg_unlink(a, r->p_msg);
        pulc_msg_free(a, r->p_msg);
        return -1;
    }
    return 0;
}

/* Direct messages from PSP_SHARED_COPY_MIN bytes are copied by reader and writer together, in
 * two halves (fewer, larger calls copy faster here: 4 MiB went 16 GB/s in 128 KiB chunks,
 * 20 GB/s in quarters and 23-30 GB/s in halves), chunks a multiple of PULC_SHARE_CHUNK. */
#define PULC_SHARE_CHUNK (64u << 10)

/*
 * Copy chunks of a SHARED direct message until none is left: the reader pulls
 * (process_vm_readv), the writer pushes (process_vm_writev); each chunk is copied once.
 * Returns the number of chunks this call copied.
 */
static int copy_chunks(struct pulc_msg *m, int writer, const uint8_t *sbuf)
{
    uint32_t n = m->recv_len, chunk = m->chunk;
    for (int done = 0;; done++) {
        uint32_t c = __atomic_fetch_add(&m->chunk_next, 1, __ATOMIC_ACQ_REL);
        uint64_t off = (uint64_t)c * chunk;
        if (off >= n)
            return done;
        uint32_t len = n - off < chunk ? (uint32_t)(n - off) : chunk;
        uint32_t got = 0;
        while (got < len) {
            ssize_t k;
            if (writer) {
                struct iovec l = {(void *)(sbuf + off + got), len - got};
                struct iovec r = {(void *)(uintptr_t)(m->recv_addr + off + got), len - got};
                k = process_vm_writev(m->recv_pid, &l, 1, &r, 1, 0);
            } else {
                struct iovec l = {(uint8_t *)(uintptr_t)m->recv_addr + off + got, len - got};
                struct iovec r = {(void *)(uintptr_t)(m->direct_addr + off + got), len - got};
                k = process_vm_readv(m->direct_pid, &l, 1, &r, 1, 0);
            }
            if (k <= 0) {
                int e = k < 0 ? -errno : -EIO;
                int32_t none = 0;
                __atomic_compare_exchange_n(&m->copy_err, &none, e, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE);
                break;
            }
            got += (uint32_t)k;
        }
        __atomic_add_fetch(&m->copied, len, __ATOMIC_ACQ_REL); /* counted even when failed */
    }
}

/* The writer of a direct send whose reader shares the copy: take chunks too; 1 if it did. */
static int help_copy(struct pulc_area *a, PSP_Request *r)
{
    struct pulc_msg *m = pulc_msg_at(a, r->p_msg);
    if (!(__atomic_load_n(&m->flags, __ATOMIC_ACQUIRE) & PULC_MSG_SHARED) ||
        (uint64_t)__atomic_load_n(&m->chunk_next, __ATOMIC_ACQUIRE) * m->chunk >= m->recv_len)
        return 0;
    return copy_chunks(m, 1, r->p_sbuf) > 0;
}

/* Take chunks of our own direct sends whose readers share the copy; 1 if any were copied.
 * A reader waiting for its writer's last chunk does this meanwhile: when both processes
 * send to each other, each would otherwise wait idle for the other (osu_bibw). */
static int help_sends(struct pulc_proc *P)
{
    int any = 0;
    for (PSP_Request *r = P->lsend_head; r; r = r->p_next)
        if (r->p_state == PULC_RQ_SEND_DIRECT)
            any |= help_copy(P->node.area, r);
    return any;
}

/* A direct message: copy it once from the sender's memory, then hand it back. */
static void take_direct(struct pulc_proc *P, PSP_Port *port, PSP_Request *r)
{
    struct pulc_area *a = P->node.area;
    struct pulc_msg *m = pulc_msg_at(a, r->p_msg);
    uint32_t total = m->total, n = total < r->p_buflen ? total : r->p_buflen;
    int err = 0;
    uint32_t got = 0;
    if (n >= PSP_SHARED_COPY_MIN) {
        /* Publish our buffer: the writer, polling for its send to complete, copies chunks
         * into it while we copy others from its memory. */
        if (pulc_area_lock(a))
            return;
        m->recv_pid = P->node.pid;
        m->recv_addr = (uint64_t)(uintptr_t)r->p_rbuf;
        m->recv_len = n;
        m->chunk = (n / 2 + PULC_SHARE_CHUNK - 1) / PULC_SHARE_CHUNK * PULC_SHARE_CHUNK;
        m->chunk_next = 0;
        m->copied = 0;
        m->copy_err = 0;
        __atomic_store_n(&m->flags, (uint8_t)(m->flags | PULC_MSG_SHARED), __ATOMIC_RELEASE);
        pulc_area_unlock(a);
        copy_chunks(m, 0, NULL);
        for (unsigned spin = 0; __atomic_load_n(&m->copied, __ATOMIC_ACQUIRE) < n; spin++) {
            if (__atomic_load_n(&m->flags, __ATOMIC_ACQUIRE) & PULC_MSG_ABORTED) {
                err = -ECONNRESET; /* the writer died holding a chunk */
                break;
            }
            if (!help_sends(P) && spin > 64)
                PSP_Yield();
        }
        if (!err)
            err = __atomic_load_n(&m->copy_err, __ATOMIC_ACQUIRE);
        got = err ? 0 : n;
    } else {
        while (got < n) {
            struct iovec l = {(uint8_t *)r->p_rbuf + got, n - got};
            struct iovec rv = {(void *)(uintptr_t)(m->direct_addr + got), n - got};
            ssize_t k = process_vm_readv(m->direct_pid, &l, 1, &rv, 1, 0);
            if (k <= 0) {
                err = k < 0 ? -errno : -EIO;
                break;
            }
            got += (uint32_t)k;
        }
    }
    if (pulc_area_lock(a))
        return;
    pulc_msg_unlink(a, r->p_msg);
    if (m->flags & PULC_MSG_ABORTED) { /* the sender died: nobody takes it back */
        pulc_msg_free(a, r->p_msg);
        err = -ECONNRESET;
    } else {
        /* The writer polls for this (it never sleeps on it): no wake-up needed. */
        m->direct_err = err;
        m->state = PULC_MSG_DIRECT_DONE;
        __atomic_store_n(&m->done, err ? 2u : 1u, __ATOMIC_RELEASE);
    }
    pulc_area_unlock(a);
    r->copied = got;
    rq_remove(&port->rq_head, &port->rq_tail, r);
    rq_complete(r,
                err ? (err == -ESRCH ? -ECONNRESET : err) : (total > r->p_buflen ? -EMSGSIZE : 0));
}

/* Match and take for a port's posted receives when its queue changed. */
static void progress_port(struct pulc_proc *P, PSP_Port *port)
{
    struct pulc_area *a = P->node.area;
    struct pulc_port *pt = pulc_port_at(a, port->idx);
    int rings_left = pulc_local_take(P, port);
    uint32_t ev = __atomic_load_n(&pt->event, __ATOMIC_ACQUIRE);
    if (ev == port->seen_event && !rings_left)
        return;
    if (pulc_area_lock(a))
        return;
    port->seen_event = ev;
    if ((rings_left || pulc_local_ready(P, port)) && pulc_local_move_locked(P, port))
        port->seen_event--; /* out of descriptors: try again at the next pass */
    PSP_Request *direct = NULL;
    for (PSP_Request *r = port->rq_head, *next; r; r = next) {
        next = r->p_next;
        if (r->p_state == PULC_RQ_RECV_POSTED && !match(a, port, r))
            break; /* later receives must not overtake an unmatched earlier one */
        struct pulc_msg *m = pulc_msg_at(a, r->p_msg);
        if (m->flags & PULC_MSG_DIRECT) {
            if (!direct)
                direct = r;
            continue;
        }
        int t = take(a, r);
        if (t) {
            rq_remove(&port->rq_head, &port->rq_tail, r);
            rq_complete(r, t < 0 ? -ECONNRESET : (r->len > r->p_buflen ? -EMSGSIZE : 0));
        }
    }
    pulc_area_unlock(a);
    if (direct) {
        take_direct(P, port, direct);
        port->seen_event--; /* more may be matched or direct */
    }
}

int PSP_IProbe(PSP_Port *port, PSP_AcceptFn accept, void *arg, PSP_MsgInfo *info)
{
    struct pulc_proc *P = &proc;
    pulc_progress(P);
    struct pulc_area *a = P->node.area;
    if (pulc_area_lock(a))
        return 0;
    int found = 0;
    struct pulc_port *pt = pulc_port_at(a, port->idx);
    if (pulc_local_ready(P, port)) { /* what the rings hold is seen in the queue */
        pulc_local_move_locked(P, port);
        port->seen_event--;
    }
    for (uint32_t i = pt->qhead; i != PULC_NONE && !found; i = pulc_msg_at(a, i)->next) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        if (m->flags & (PULC_MSG_CLAIMED | PULC_MSG_ABORTED | PULC_MSG_HIDDEN))
            continue;
        PSP_MsgInfo mi = {m->src, m->total, m->xlen, m->xhdr, NULL};
        if (!accept || accept(&mi, arg)) {
            *info = mi;
            info->xheader = NULL;
            found = 1;
        }
    }
    pulc_area_unlock(a);
    return found;
}

int PSP_Cancel(PSP_Request *req)
{
    if (req->p_state != PULC_RQ_RECV_POSTED)
        return -EBUSY;
    PSP_Port *port = req->p_port;
    rq_remove(&port->rq_head, &port->rq_tail, req);
    rq_complete(req, -ECANCELED);
    port->seen_event--; /* later receives may match now */
    return 0;
}

/* ---- progress and waiting ---- */

/* One progress turn (pulc_progress): 1 when this process's traffic moved (its sends were
 * posted, frames or messages arrived at its ports, rawdata was copied into its buffers), 0
 * when nothing of it moved, or a negative errno.  *turn set when it began a
 * turn that runs the firmware (pulc_area_turn), which the caller ends. */
static int progress_turn(struct pulc_proc *P, int *turn)
{
    struct pulc_hal *h = P->h;
    int rc, moved = 0;
    /* The NIC (a firmware pass costs a system call; the host queue and the error queue
     * share cache lines the firmware writes): at every call while this process has talked
     * to other nodes lately, else at most every PULC_NIC_QUIET_NS, so local traffic does not
     * pay for it at every turn.  psid's NIC thread keeps the firmware going meanwhile. */
    uint64_t now = 0;
    /* The kernel provider's NIC turn costs no system call unless we posted sends. */
    int nic_turn = P->rsend_head != NULL || P->nic_busy || h->kernel;
    if (!nic_turn && (++P->calls & 31) == 0) { /* reading the clock costs too, in a VM */
        now = mcp_now_ns();
        P->nic_busy = now - P->remote_ns < PULC_NIC_BUSY_NS;
        nic_turn = P->nic_busy || now - P->nic_ns >= PULC_NIC_QUIET_NS;
    }
    P->at_post_ns = 0; /* the next remote post may send at once again */
    if (nic_turn) {
        if (!now)
            now = mcp_now_ns();
        if (!h->kernel) { /* psid's NIC thread leaves the NIC to us until the turn ends */
            pulc_area_turn(P->node.area, h->ctx, now);
            *turn = 1;
        }
        rc = pulc_hal_pass(h, 1);
        if (rc < 0)
            return rc;
        P->nic_ns = now;
        if (rc > 0)
            P->remote_ns = now;
        /* busy until PULC_NIC_BUSY_NS pass without inter-node traffic */
        P->nic_busy = now - P->remote_ns < PULC_NIC_BUSY_NS;
        struct mcp_rx_desc d;
        if (mcp_recv_peek(P->node.img, &d)) {
            P->remote_ns = now;
            rc = pulc_drain(&P->node, 64);
            if (rc < 0)
                return rc;
        }
        struct mcp_send_error e;
        while (pulc_hal_send_error(h, &e))
            send_failed(P, &e);
    }
    while (P->rsend_head && post_remote(P, P->rsend_head)) {
        PSP_Request *r = P->rsend_head;
        rq_remove(&P->rsend_head, &P->rsend_tail, r);
        if (!P->h->kernel) /* (the kernel provider's kick comes below) */
            tx_handoff(P, PSP_PORTID_NODE(r->p_dest), r->p_msg);
        rq_complete(r, 0);
        moved = 1;
    }
    if (P->lsend_head)
        progress_local(P);
    for (PSP_Port *port = P->ports; port; port = port->next)
        if (port->rq_head || port->nrx_rings ||
            pulc_port_at(P->node.area, port->idx)->rings_gen != port->rx_rings_gen)
            progress_port(P, port); /* ring messages move to the queue without receives */
    if (P->raw_regs && pulc_raw_progress(P))
        moved = 1;
    /* Frames or messages arrived at our ports (whoever drained them bumps the port's event;
     * ring messages count in activity).  The firmware's own work is not ours: a pass moves
     * every process's frames, and another process's transfer must not keep us awake. */
    for (PSP_Port *port = P->ports; port; port = port->next) {
        uint32_t mark =
            __atomic_load_n(&pulc_port_at(P->node.area, port->idx)->event, __ATOMIC_RELAXED) +
            port->activity;
        if (mark != port->moved_mark) {
            port->moved_mark = mark;
            moved = 1;
        }
    }
    /* kernel provider: what this turn posted goes out now, not at the next turn */
    rc = pulc_hal_kick(h);
    return rc < 0 ? rc : moved;
}

int pulc_progress(struct pulc_proc *P)
{
    int turn = 0;
    int rc = progress_turn(P, &turn);
    if (turn)
        pulc_area_turn(P->node.area, P->h->ctx, 0);
    return rc;
}

int PSP_Progress(void)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    return P ? pulc_progress(P) : err;
}

/* The sleepers' fence (wakefence.h) before a sleep of at most ns, which it returns: a
 * millisecond when the barrier failed (a light sender may not have seen us: look again soon). */
static uint64_t fence_for_sleep(uint64_t ns)
{
    return pulc_wakefence_sleep() < 0 && ns > 1000000u ? 1000000u : ns;
}

/*
 * pulc_wait's sleep with the kernel provider: nobody drains the host queue for us (the
 * module's thread delivers frames but cannot move them into ports), so sleep in the device
 * until the firmware delivered something (rx_event) or a process queued for one of our ports
 * (pulc_port_wake through PSK_IOC_WAKE), at most left_ns.  Returns 0 or a negative errno.
 */
static int kernel_sleep(struct pulc_proc *P, PSP_Port *port, int (*done)(void *), void *arg,
                        uint64_t left_ns)
{
    struct pulc_hal *h = P->h;
    struct pulc_port *pt = pulc_port_at(P->node.area, port->idx);
    int rc = 0;
    __atomic_add_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
    uint64_t slice = 100000000u; /* re-check every 100 ms anyway */
    uint32_t rx_seen = __atomic_load_n(&P->node.img->rx_event, __ATOMIC_ACQUIRE);
    uint32_t ev = __atomic_load_n(&pt->event, __ATOMIC_SEQ_CST);
    struct mcp_rx_desc d;
    int quiet = ev == port->seen_event && !P->rsend_head && !P->lsend_head;
    if (quiet) { /* the sleepers' fence, then the rings: only when we would sleep */
        slice = fence_for_sleep(slice);
        quiet = !mcp_recv_peek(P->node.img, &d) && !pulc_local_ready(P, port) && !done(arg);
    }
    if (quiet) {
        if (left_ns < slice)
            slice = left_ns;
        rc = pulc_hal_kick(h);
        if (rc >= 0)
            rc = pulc_dev_wait(h, rx_seen, (uint32_t)((slice + 999999u) / 1000000u));
        if (rc == -ETIMEDOUT || rc == -EINTR)
            rc = 0;
    } else if (P->rsend_head || P->lsend_head) {
        PSP_Yield();
    }
    __atomic_sub_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
    return rc < 0 ? rc : 0;
}

/* Nothing for the port to do that this process can see: its event ev examined, no send of
 * ours queued, no local message ready (the condition to sleep on the port). */
static int port_quiet(struct pulc_proc *P, PSP_Port *port, uint32_t ev)
{
    return ev == port->seen_event && !P->rsend_head && !P->lsend_head && !pulc_local_ready(P, port);
}

/* Sleep at most ns while the port's event is still seen; the caller counts itself among the
 * port's sleepers.  Nobody polls for us meanwhile: psid's NIC thread takes frames as they
 * come.  Touches only the shared area. */
static void nap_on_event(struct pulc_proc *P, struct pulc_port *pt, uint32_t seen, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    pulc_net_waiting(P->node.area, P->node.ctx, 1);
    syscall(SYS_futex, &pt->event, FUTEX_WAIT, seen, &ts, NULL, 0);
    pulc_net_waiting(P->node.area, P->node.ctx, -1);
}

int pulc_wait(struct pulc_proc *P, PSP_Port *port, int (*done)(void *), void *arg, int timeout_ms)
{
    struct pulc_hal *h = P->h;
    uint64_t t0 = mcp_now_ns(), now = t0;
    uint64_t end = timeout_ms < 0 ? UINT64_MAX : t0 + (uint64_t)timeout_ms * 1000000u;
    int moved = 0, shared = PSP_YieldShared(); /* kept up to date by the yields below */
    for (unsigned turn = 0;; turn++) {
        int rc = pulc_progress(P);
        if (rc < 0)
            return rc;
        if (done(arg))
            return 0;
        moved |= rc;
        if ((turn & 15) == 0) {
            now = mcp_now_ns();
            /* Traffic moving is not waiting: spin and yield count from when it stops.  A
             * long transfer (4 MiB both ways between two nodes) otherwise slept every
             * PSP_SPIN_US + PSP_YIELD_US and left the firmware to psid's NIC thread. */
            if (moved)
                t0 = now;
            moved = 0;
        }
        if (now >= end)
            return -ETIMEDOUT;
        uint64_t waited = now - t0;
        if (waited < h->spin_ns && !shared)
            continue; /* spin, unless the CPU is shared: then the spin keeps others off it */
        if (waited < h->spin_ns + h->yield_ns || !port) {
            shared = PSP_Yield();
            continue;
        }
        if (h->kernel) {
            rc = kernel_sleep(P, port, done, arg, end - now);
            if (rc < 0)
                return rc;
            now = mcp_now_ns();
            continue;
        }
        /* Sleep on the port's event: whoever queues for it (a local sender, another process's
         * drain, psid's NIC thread) wakes us. */
        struct pulc_port *pt = pulc_port_at(P->node.area, port->idx);
        uint32_t seen = __atomic_load_n(&pt->event, __ATOMIC_ACQUIRE);
        __atomic_add_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
        uint64_t slice = 100000000u; /* re-check every 100 ms anyway */
        int quiet = port_quiet(P, port, seen) && !done(arg);
        if (quiet) { /* the sleepers' fence, then the last look: only when we would sleep */
            slice = fence_for_sleep(slice);
            quiet = port_quiet(P, port, seen) && !done(arg);
        }
        if (quiet) {
            uint64_t left = end - now;
            nap_on_event(P, pt, seen, left < slice ? left : slice);
        } else if (P->rsend_head || P->lsend_head) {
            __atomic_sub_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
            PSP_Yield();
            now = mcp_now_ns();
            continue;
        }
        __atomic_sub_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
        now = mcp_now_ns();
    }
}

static int req_done(void *arg)
{
    return __atomic_load_n(&((PSP_Request *)arg)->p_state, __ATOMIC_ACQUIRE) == PULC_RQ_DONE;
}

int PSP_IsComplete(const PSP_Request *req)
{
    return req_done((void *)(uintptr_t)req);
}

int PSP_Test(PSP_Request *req)
{
    if (req_done(req))
        return 1;
    pulc_progress(&proc);
    return req_done(req);
}

int PSP_Wait(PSP_Request *req, int timeout_ms)
{
    if (req_done(req))
        return req->error;
    PSP_Port *port = req->p_state >= PULC_RQ_RECV_POSTED ? req->p_port : NULL;
    int rc = pulc_wait(&proc, port, req_done, req, timeout_ms);
    return rc ? rc : req->error;
}

struct port_watch {
    const struct pulc_port *pt;
    const PSP_Port *port;
    uint32_t event;    /* the port's event at the call */
    uint32_t seen;     /* what this process had examined of it at the call */
    uint32_t activity; /* ring messages it had taken at the call */
};

/*
 * Something happened on the port: its event moved, or this process examined a change it had
 * not looked at yet (one that came just before the call: the first progress of the wait
 * takes it, and the caller must get to see it).
 */
static int port_changed(void *arg)
{
    const struct port_watch *w = arg;
    return __atomic_load_n(&w->pt->event, __ATOMIC_ACQUIRE) != w->event ||
           w->port->seen_event != w->seen || w->port->activity != w->activity;
}

int PSP_WaitPort(PSP_Port *port, int timeout_ms)
{
    struct port_watch w = {pulc_port_at(proc.node.area, port->idx), port, 0, port->seen_event,
                           port->activity};
    w.event = __atomic_load_n(&w.pt->event, __ATOMIC_ACQUIRE);
    return pulc_wait(&proc, port, port_changed, &w, timeout_ms);
}

int PSP_PortIdle(PSP_Port *port, uint32_t *ticket)
{
    struct pulc_proc *P = &proc;
    if (!P->node.area || P->h->kernel)
        return 0;
    uint32_t ev = __atomic_load_n(&pulc_port_at(P->node.area, port->idx)->event, __ATOMIC_ACQUIRE);
    if (!port_quiet(P, port, ev))
        return 0;
    *ticket = ev;
    return 1;
}

int PSP_TakeLocal(PSP_Port *port)
{
    struct pulc_proc *P = &proc;
    if (!P->node.area || P->h->kernel || P->nic_busy || P->raw_regs || P->rsend_head ||
        P->lsend_head || !port->nrx_rings)
        return -1;
    struct pulc_port *pt = pulc_port_at(P->node.area, port->idx);
    if (__atomic_load_n(&pt->event, __ATOMIC_ACQUIRE) != port->seen_event)
        return -1;
    uint32_t before = port->activity; /* counts the ring messages taken */
    int left = pulc_local_take(P, port);
    return port->activity != before ? 1 : left ? -1 : 0;
}

int PSP_SleepPort(PSP_Port *port, uint32_t ticket, int timeout_ms)
{
    /* Only the shared area is touched here (the port's event and sleeper count, the NIC's
     * waiter count): the caller's other threads may be inside the library meanwhile. */
    struct pulc_proc *P = &proc;
    if (!P->node.area)
        return -ENOTCONN;
    struct pulc_port *pt = pulc_port_at(P->node.area, port->idx);
    __atomic_add_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
    uint64_t ns = (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    /* The ticket's look at the rings came before we counted ourselves: a message put in
     * between woke nobody, so after the sleepers' fence look at them again (from the
     * shared area alone). */
    if (__atomic_load_n(&pt->event, __ATOMIC_SEQ_CST) == ticket && ns) {
        ns = fence_for_sleep(ns);
        if (__atomic_load_n(&pt->event, __ATOMIC_SEQ_CST) == ticket &&
            !pulc_local_ready_shared(P->node.area, port->idx))
            nap_on_event(P, pt, ticket, ns);
    }
    __atomic_sub_fetch(&pt->sleepers, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void PSP_WakePort(PSP_Port *port)
{
    if (proc.node.area)
        pulc_port_wake(proc.node.area, port->idx);
}

int PSP_Send(PSP_Port *port, PSP_PortId dest, const void *xheader, uint16_t xlen, const void *buf,
             uint32_t len)
{
    PSP_Request r;
    int rc = PSP_ISend(port, dest, xheader, xlen, buf, len, &r);
    if (rc)
        return rc;
    struct pulc_proc *P = &proc;
    if (!P->h->kernel && PSP_PORTID_NODE(dest) != P->node.node_id && req_done(&r) &&
        mcp_tx_waiting(P->node.img, (unsigned)P->node.ctx, PSP_PORTID_NODE(dest))) {
        /* the caller may stop polling now: send what the window lets go (unless the post
         * did), and have psid send the rest */
        (void)pulc_nic_send_try(P->node.area, &P->h->nic);
        tx_handoff(P, PSP_PORTID_NODE(dest), 0);
    }
    return PSP_Wait(&r, -1);
}

int PSP_SendWaiting(PSP_PortId dest)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    uint16_t node = PSP_PORTID_NODE(dest);
    if (!P || node == P->node.node_id || P->node.ctx < 0)
        return 0;
    return mcp_tx_waiting(P->node.img, (unsigned)P->node.ctx, node);
}

int PSP_AckNow(PSP_PortId peer)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    uint16_t node = PSP_PORTID_NODE(peer);
    if (node == P->node.node_id)
        return 0;
    mcp_ack_asap(P->node.img, node);
    if (P->h->kernel) /* the module's firmware thread runs at the doorbell */
        return pulc_dev_ring(P->h);
    (void)pulc_nic_send_try(P->node.area, &P->h->nic);
    return 0;
}

int PSP_Receive(PSP_Port *port, void *xbuf, uint16_t xmax, void *buf, uint32_t len,
                PSP_AcceptFn accept, void *arg, PSP_Request *req)
{
    int rc = PSP_IReceive(port, xbuf, xmax, buf, len, accept, arg, req);
    return rc ? rc : PSP_Wait(req, -1);
}
