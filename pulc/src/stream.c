/*
 * stream.c — port-S (one byte stream per port) and port-M (one byte stream per sender) on top
 * of the queued protocols PULC_PROTO_S and PULC_PROTO_M.
 *
 * A write is one message (pulc_send_start), queued at the destination port like a port-D
 * message.  A read takes bytes of one stream from the port's queue: the stream's oldest
 * message first, from where the last read stopped (m->taken), on into the stream's next
 * messages, skipping other streams' messages, so the bytes of consecutive writes join.  A
 * partly read message is CLAIMED; a fully read one is unlinked and freed (or, a large local
 * one copied from the writer with process_vm_readv, handed back to the writer).  Everything
 * under the area lock except those copies, during which the CLAIMED flag keeps the message
 * ours (a dying writer's reclaim marks it ABORTED instead of freeing it).
 *
 * Port-S peer: fixed by the port's first successful write, or by the first message the owner
 * finds in its queue (arrival order), whichever the owner sees first.  Messages from anyone
 * else are refused by the owner when it next reads (or writes): dropped, and the writer told
 * -ECONNREFUSED — an error notice through the NIC for a remote writer, the writer's port error
 * for a local one, the write's own result for a large local (direct) write.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pulc_int.h"

/* Reader state of a port-S or port-M port (PSP_Port.stream, freed by PSP_ClosePort). */
struct stream_state {
    PSP_PortId peer; /* port-S: the stream peer, when has_peer */
    int has_peer;
    int lost_err;        /* a stream lost bytes (writer died mid-write): -ECONNRESET, or 0 */
    PSP_PortId lost_src; /* whose stream */
};

static struct stream_state *stream_of(PSP_Port *port)
{
    if (!port->stream)
        port->stream = calloc(1, sizeof(struct stream_state));
    return port->stream;
}

/* ---- writing ---- */

static int send_done(void *arg)
{
    return __atomic_load_n(&((PSP_Request *)arg)->p_state, __ATOMIC_ACQUIRE) == PULC_RQ_DONE;
}

/* One write = one message of proto; returns when the data is handed over. */
static int stream_write(struct pulc_proc *P, PSP_Port *port, unsigned proto, PSP_PortId dest,
                        const void *buf, uint32_t len)
{
    PSP_Request req;
    int rc = pulc_send_start(P, port, proto, dest, NULL, 0, buf, len, &req);
    if (rc)
        return rc;
    if (!send_done(&req)) {
        rc = pulc_wait(P, NULL, send_done, &req, -1);
        if (rc)
            return rc;
    }
    return req.error;
}

/* Port-S without a peer yet: adopt the sender of the first queued message, if any. */
static int adopt_queued_peer(struct pulc_proc *P, PSP_Port *port, struct stream_state *st)
{
    struct pulc_area *a = P->node.area;
    int rc = pulc_area_lock(a);
    if (rc)
        return rc;
    uint32_t i = pulc_port_at(a, port->idx)->qhead;
    if (i != PULC_NONE) {
        st->peer = pulc_msg_at(a, i)->src;
        st->has_peer = 1;
    }
    pulc_area_unlock(a);
    return 0;
}

int PSP_SWrite(PSP_Port *port, PSP_PortId dest, const void *buf, uint32_t len)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    if (!port || (len && !buf))
        return -EINVAL;
    if (port->kind != PSP_PORT_S)
        return -EPROTOTYPE;
    struct stream_state *st = stream_of(port);
    if (!st)
        return -ENOMEM;
    if (!st->has_peer && (err = adopt_queued_peer(P, port, st)) != 0)
        return err;
    if (st->has_peer && st->peer != dest)
        return -EISCONN;
    if (len == 0)
        return 0; /* nothing to hand over; the peer is not fixed by it */
    PSP_Request req;
    err = pulc_send_start(P, port, PULC_PROTO_S, dest, NULL, 0, buf, len, &req);
    if (err)
        return err;
    if (!st->has_peer) {
        st->peer = dest;
        st->has_peer = 1;
    }
    if (!send_done(&req)) {
        err = pulc_wait(P, NULL, send_done, &req, -1);
        if (err)
            return err;
    }
    return req.error;
}

int PSP_MWrite(PSP_Port *port, PSP_PortId dest, const void *buf, uint32_t len)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    if (!port || (len && !buf))
        return -EINVAL;
    if (port->kind != PSP_PORT_M)
        return -EPROTOTYPE;
    if (len == 0)
        return 0;
    return stream_write(P, port, PULC_PROTO_M, dest, buf, len);
}

int PSP_SGetPeer(const PSP_Port *port, PSP_PortId *peer)
{
    if (!port || port->kind != PSP_PORT_S)
        return -EPROTOTYPE;
    const struct stream_state *st = port->stream;
    if (!st || !st->has_peer)
        return 0;
    if (peer)
        *peer = st->peer;
    return 1;
}

/* ---- reading ---- */

/* One read call: the caller's buffer and what it got so far. */
struct stream_read {
    struct pulc_proc *P;
    PSP_Port *port;
    struct stream_state *st;
    int mode;        /* READ_S, READ_M_ANY or READ_M_FROM */
    PSP_PortId from; /* READ_M_FROM: the stream to read; else set to the stream read */
    uint8_t *buf;
    uint32_t len, got;
    int force;  /* look at the queue even if the port's event did not change */
    int retry;  /* a refusal could not be sent yet: look again without waiting for an event */
    int locked; /* the area lock is held (it is dropped for direct copies) */
    int err;    /* the area lock could not be taken */
};

enum { READ_S, READ_M_ANY, READ_M_FROM };

/* A direct message the reader is done with (or gives up): back to its writer, who frees it. */
static void direct_hand_back(struct pulc_area *a, uint32_t i, int err)
{
    struct pulc_msg *m = pulc_msg_at(a, i);
    pulc_msg_unlink(a, i);
    if (m->flags & PULC_MSG_ABORTED) { /* the writer died: nobody takes it back */
        pulc_msg_free(a, i);
        return;
    }
    m->direct_err = err;
    m->state = PULC_MSG_DIRECT_DONE;
    __atomic_store_n(&m->done, err ? 2u : 1u, __ATOMIC_RELEASE);
    syscall(SYS_futex, &m->done, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Drop message i of the stream src, whose remaining bytes will never come. */
static void drop_lost(struct stream_read *rd, uint32_t i, PSP_PortId src)
{
    struct pulc_area *a = rd->P->node.area;
    if (pulc_msg_at(a, i)->flags & PULC_MSG_DIRECT) {
        direct_hand_back(a, i, -ECONNRESET);
    } else {
        pulc_msg_unlink(a, i);
        pulc_msg_free(a, i);
    }
    rd->st->lost_err = -ECONNRESET;
    rd->st->lost_src = src;
}

/* Copy n bytes at addr of process pid to dst: 0 or a negative errno. */
static int copy_from_writer(int32_t pid, uint64_t addr, uint8_t *dst, uint32_t n)
{
    uint32_t got = 0;
    while (got < n) {
        struct iovec l = {dst + got, n - got};
        struct iovec r = {(void *)(uintptr_t)(addr + got), n - got};
        ssize_t k = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (k <= 0)
            return k < 0 ? -errno : -EIO;
        got += (uint32_t)k;
    }
    return 0;
}

/*
 * Read a direct message's next bytes from its writer (area lock held on entry; dropped for
 * the copy and taken again).  Returns 1 when the stream may go on to its next message, 0
 * when the read stops here.
 */
static int read_direct(struct stream_read *rd, uint32_t i, PSP_PortId src)
{
    struct pulc_area *a = rd->P->node.area;
    struct pulc_msg *m = pulc_msg_at(a, i);
    if (m->flags & PULC_MSG_ABORTED) {
        drop_lost(rd, i, src);
        return 0;
    }
    uint32_t n = m->total - m->taken;
    if (n > rd->len - rd->got)
        n = rd->len - rd->got;
    int32_t pid = m->direct_pid;
    uint64_t addr = m->direct_addr + m->taken;
    m->flags |= PULC_MSG_CLAIMED; /* ours while we copy without the lock */
    pulc_area_unlock(a);
    rd->locked = 0;
    int err = copy_from_writer(pid, addr, rd->buf + rd->got, n);
    int rc = pulc_area_lock(a);
    if (rc) {
        rd->err = rc;
        return 0;
    }
    rd->locked = 1;
    if (err || (m->flags & PULC_MSG_ABORTED)) {
        /* The writer died (or gave a bad buffer): what we copied may be incomplete; the rest
         * of its write is lost. */
        drop_lost(rd, i, src);
        return 0;
    }
    m->taken += n;
    rd->got += n;
    if (m->taken < m->total)
        return 0;
    direct_hand_back(a, i, 0);
    return 1;
}

/*
 * Read the stream of sender src from the port's queue, starting at its oldest queued message
 * i (area lock held): arrived bytes in order, across message boundaries, until the buffer is
 * full or the stream has nothing more that arrived.
 */
static void read_stream(struct stream_read *rd, PSP_PortId src, uint32_t i)
{
    struct pulc_area *a = rd->P->node.area;
    while (i != PULC_NONE && rd->locked) {
        struct pulc_msg *m = pulc_msg_at(a, i);
        uint32_t next = m->next;
        if (m->src != src) {
            i = next;
            continue;
        }
        if (m->total == 0) { /* an empty write: nothing to read */
            pulc_msg_unlink(a, i);
            pulc_msg_free(a, i);
            i = next;
            continue;
        }
        if (rd->got == rd->len)
            break;
        if (m->flags & PULC_MSG_DIRECT) {
            if (!read_direct(rd, i, src))
                break;
            i = pulc_port_at(a, rd->port->idx)->qhead; /* the queue may have changed */
            continue;
        }
        rd->got += pulc_msg_read(a, i, rd->buf + rd->got, rd->len - rd->got);
        if (m->taken == m->total) {
            pulc_msg_unlink(a, i);
            pulc_msg_free(a, i);
            i = next;
            continue;
        }
        if ((m->flags & PULC_MSG_ABORTED) && m->taken == m->received) {
            /* The writer died or restarted mid-write.  Report the gap after the bytes before
             * it: drop now only if this read got none of them. */
            if (rd->got == 0)
                drop_lost(rd, i, src);
            break;
        }
        if (m->taken)
            m->flags |= PULC_MSG_CLAIMED; /* partly read: the rest is this stream's next */
        break;
    }
}

/* Whether a stream reader can do something with message m now. */
static int msg_readable(const struct pulc_msg *m)
{
    if (m->total == 0 || (m->flags & (PULC_MSG_DIRECT | PULC_MSG_ABORTED)))
        return 1;
    return __atomic_load_n(&m->received, __ATOMIC_ACQUIRE) > m->taken;
}

/* Whether a message from src is queued before message i. */
static int older_from(struct pulc_area *a, uint32_t i, PSP_PortId src)
{
    for (uint32_t k = pulc_msg_at(a, i)->prev; k != PULC_NONE; k = pulc_msg_at(a, k)->prev)
        if (pulc_msg_at(a, k)->src == src)
            return 1;
    return 0;
}

/*
 * Refuse message i from a sender that is not the port-S peer (area lock held): drop it and
 * tell the writer -ECONNREFUSED.  0, or -EAGAIN when the notice cannot be sent yet (the
 * message stays queued and is refused at a later read).
 */
static int refuse(struct stream_read *rd, uint32_t i)
{
    struct pulc_proc *P = rd->P;
    struct pulc_area *a = P->node.area;
    struct pulc_msg *m = pulc_msg_at(a, i);
    uint16_t node = PSP_PORTID_NODE(m->src), num = PSP_PORTID_NUMBER(m->src);
    if (m->flags & PULC_MSG_DIRECT) { /* the local writer is still waiting: its result */
        direct_hand_back(a, i, -ECONNREFUSED);
        return 0;
    }
    if (!(m->flags & PULC_MSG_ABORTED)) {
        if (node != P->node.node_id) {
            int rc = pulc_send_error(&P->node, node, num, (uint16_t)rd->port->idx, m->msg_id,
                                     ECONNREFUSED);
            if (rc)
                return rc;
        } else if (num < a->cfg.ports) {
            struct pulc_port *wp = pulc_port_at(a, num);
            if (wp->state == PULC_PORT_OPEN) {
                wp->error_src = PSP_GetPortId(rd->port);
                wp->error_msg_id = m->msg_id;
                __atomic_store_n(&wp->error, -ECONNREFUSED, __ATOMIC_RELEASE);
                pulc_port_wake(a, num);
            }
        }
    }
    pulc_msg_unlink(a, i);
    pulc_msg_free(a, i);
    return 0;
}

/* One look at the port's queue for the read rd (takes and releases the area lock). */
static void read_pass(struct stream_read *rd)
{
    struct pulc_area *a = rd->P->node.area;
    struct pulc_port *pt = pulc_port_at(a, rd->port->idx);
    int rc = pulc_area_lock(a);
    if (rc) {
        rd->err = rc;
        return;
    }
    rd->locked = 1;
    struct stream_state *st = rd->st;
    uint32_t start = PULC_NONE;
    if (rd->mode == READ_S) {
        for (uint32_t i = pt->qhead, next; i != PULC_NONE; i = next) {
            struct pulc_msg *m = pulc_msg_at(a, i);
            next = m->next;
            if (!st->has_peer) {
                st->peer = m->src;
                st->has_peer = 1;
            }
            if (m->src != st->peer && refuse(rd, i))
                rd->retry = 1;
            else if (start == PULC_NONE)
                start = i;
        }
        rd->from = st->peer;
    } else if (rd->mode == READ_M_FROM) {
        for (start = pt->qhead; start != PULC_NONE && pulc_msg_at(a, start)->src != rd->from;)
            start = pulc_msg_at(a, start)->next;
    } else {
        /* The stream whose data arrived first: the first message with something to read that
         * is its sender's oldest (a sender's messages are read in order). */
        int skipped = 0;
        for (start = pt->qhead; start != PULC_NONE; start = pulc_msg_at(a, start)->next) {
            struct pulc_msg *m = pulc_msg_at(a, start);
            if (msg_readable(m) && !(skipped && older_from(a, start, m->src)))
                break;
            skipped = 1;
        }
        if (start != PULC_NONE)
            rd->from = pulc_msg_at(a, start)->src;
    }
    if (start != PULC_NONE)
        read_stream(rd, rd->from, start);
    if (rd->locked)
        pulc_area_unlock(a);
    rd->locked = 0;
}

/* The error of a lost stream piece that this read should report, and clear it (0: none). */
static int take_lost(struct stream_read *rd)
{
    struct stream_state *st = rd->st;
    if (!st->lost_err || (rd->mode == READ_M_FROM && st->lost_src != rd->from))
        return 0;
    int e = st->lost_err;
    st->lost_err = 0;
    rd->from = st->lost_src;
    return e;
}

/* pulc_wait's done(): read when the port's queue changed; true once there is a result. */
static int read_ready(void *arg)
{
    struct stream_read *rd = arg;
    struct pulc_port *pt = pulc_port_at(rd->P->node.area, rd->port->idx);
    uint32_t ev = __atomic_load_n(&pt->event, __ATOMIC_ACQUIRE);
    if (!rd->force && ev == rd->port->seen_event)
        return rd->got > 0 || rd->err;
    rd->force = 0;
    rd->port->seen_event = ev; /* pulc_wait sleeps until the event moves on from here */
    rd->retry = 0;
    read_pass(rd);
    rd->force = rd->retry;
    return rd->got > 0 || rd->err ||
           (rd->st->lost_err && (rd->mode != READ_M_FROM || rd->st->lost_src == rd->from));
}

/* The common read: bytes read (> 0), or a negative errno. */
static int stream_read(PSP_Port *port, int kind, int mode, PSP_PortId *src, void *buf, uint32_t len,
                       int timeout_ms)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    if (!port || !buf || len == 0)
        return -EINVAL;
    if (port->kind != (uint32_t)kind)
        return -EPROTOTYPE;
    struct stream_state *st = stream_of(port);
    if (!st)
        return -ENOMEM;
    struct stream_read rd = {.P = P,
                             .port = port,
                             .st = st,
                             .mode = mode,
                             .from = src ? *src : 0,
                             .buf = buf,
                             .len = len > INT_MAX ? INT_MAX : len,
                             .force = 1};
    err = take_lost(&rd);
    if (!err) {
        err = pulc_wait(P, port, read_ready, &rd, timeout_ms);
        if (rd.got > 0)
            err = 0;
        else if (!err)
            err = rd.err ? rd.err : take_lost(&rd);
    }
    if (src && mode == READ_M_ANY && (rd.got > 0 || err == -ECONNRESET))
        *src = rd.from;
    return rd.got > 0 ? (int)rd.got : err;
}

int PSP_SRead(PSP_Port *port, void *buf, uint32_t len, int timeout_ms)
{
    return stream_read(port, PSP_PORT_S, READ_S, NULL, buf, len, timeout_ms);
}

int PSP_MRead(PSP_Port *port, PSP_PortId *src, void *buf, uint32_t len, int timeout_ms)
{
    if (!src)
        return -EINVAL;
    return stream_read(port, PSP_PORT_M, READ_M_ANY, src, buf, len, timeout_ms);
}

int PSP_MReadFrom(PSP_Port *port, PSP_PortId src, void *buf, uint32_t len, int timeout_ms)
{
    return stream_read(port, PSP_PORT_M, READ_M_FROM, &src, buf, len, timeout_ms);
}
