/*
 * rawdata.c — registered receive buffers and writes into them (the process side; the
 * receive handler is raw_rx.c).
 */
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pulc_int.h"

/*
 * Lock the area and find port's registration behind handle: 0 with the lock held and *m set,
 * -ENOENT (lock released) when there is none, or the lock's error.
 */
static int reg_locked(struct pulc_area *a, PSP_Port *port, const PSP_RawHandle *h,
                      struct pulc_msg **m)
{
    int rc = pulc_area_lock(a);
    if (rc)
        return rc;
    *m = PSP_PORTID_NUMBER(h->port) == port->idx ? pulc_raw_reg(a, port->idx, h->index, h->nonce)
                                                 : NULL;
    if (*m)
        return 0;
    pulc_area_unlock(a);
    return -ENOENT;
}

int PSP_RawRegister(PSP_Port *port, void *buf, uint32_t len, PSP_RawHandle *handle)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    if (len && !buf)
        return -EINVAL;
    struct pulc_area *a = P->node.area;
    int rc = pulc_area_lock(a);
    if (rc)
        return rc;
    uint32_t i = pulc_msg_alloc(a);
    if (i == PULC_NONE) {
        pulc_area_unlock(a);
        return -ENOBUFS;
    }
    struct pulc_msg *m = pulc_msg_at(a, i);
    m->flags = PULC_MSG_RAW | PULC_MSG_CLAIMED;
    m->proto = PULC_PROTO_RAW;
    m->total = len;
    m->direct_pid = P->node.pid;
    m->direct_addr = (uint64_t)(uintptr_t)buf;
    m->src = PSP_GetPortId(port);
    m->msg_id = (uint32_t)(a->seq * 2654435761u) ^ (uint32_t)P->node.pid ^ i;
    pulc_msg_enqueue(a, port->idx, i);
    pulc_port_at(a, port->idx)->msgs_in--; /* a registration is not a message */
    pulc_area_unlock(a);
    handle->port = PSP_GetPortId(port);
    handle->index = i;
    handle->nonce = m->msg_id;
    P->raw_regs++;
    return 0;
}

/* Copy queued fragments of our registrations into their buffers. */
int pulc_raw_progress(struct pulc_proc *P)
{
    struct pulc_area *a = P->node.area;
    int copied = 0;
    for (PSP_Port *port = P->ports; port; port = port->next) {
        struct pulc_port *pt = pulc_port_at(a, port->idx);
        int locked = 0;
        for (uint32_t i = pt->qhead; i != PULC_NONE;) {
            struct pulc_msg *m = pulc_msg_at(a, i);
            if ((m->flags & PULC_MSG_RAW) &&
                __atomic_load_n(&m->frag_head, __ATOMIC_ACQUIRE) != PULC_NONE) {
                if (!locked) {
                    if (pulc_area_lock(a))
                        return copied;
                    locked = 1;
                    i = pt->qhead; /* the queue may have changed before we locked */
                    continue;
                }
                pulc_msg_read(a, i, (uint8_t *)(uintptr_t)m->direct_addr + m->taken,
                              m->total - m->taken);
            }
            i = m->next;
        }
        if (locked)
            pulc_area_unlock(a);
        copied |= locked;
    }
    return copied;
}

int64_t PSP_RawReceived(PSP_Port *port, const PSP_RawHandle *handle)
{
    struct pulc_area *a = pulc_hal_self()->area;
    struct pulc_msg *m;
    if (!a)
        return -ENOTCONN;
    int rc = reg_locked(a, port, handle, &m);
    if (rc)
        return rc;
    int64_t r = m->taken;
    pulc_area_unlock(a);
    return r;
}

struct raw_wait {
    struct pulc_msg *m;
    uint32_t bytes;
    uint32_t nonce;
};

static int raw_arrived(void *arg)
{
    struct raw_wait *w = arg;
    return __atomic_load_n(&w->m->taken, __ATOMIC_ACQUIRE) >= w->bytes ||
           __atomic_load_n(&w->m->state, __ATOMIC_ACQUIRE) != PULC_MSG_QUEUED ||
           w->m->msg_id != w->nonce;
}

int PSP_RawWait(PSP_Port *port, const PSP_RawHandle *handle, uint32_t bytes, int timeout_ms)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    struct pulc_msg *m;
    int rc = reg_locked(P->node.area, port, handle, &m);
    if (rc)
        return rc;
    pulc_area_unlock(P->node.area);
    if (bytes > m->total)
        return -EINVAL;
    struct raw_wait w = {m, bytes, handle->nonce};
    rc = pulc_wait(P, port, raw_arrived, &w, timeout_ms);
    if (rc)
        return rc;
    return m->taken >= bytes ? 0 : -ECONNRESET;
}

int PSP_RawUnregister(PSP_Port *port, const PSP_RawHandle *handle)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    struct pulc_msg *m;
    int rc = reg_locked(P->node.area, port, handle, &m);
    if (rc)
        return rc;
    pulc_msg_unlink(P->node.area, handle->index);
    pulc_msg_free(P->node.area, handle->index);
    P->raw_regs--;
    pulc_area_unlock(P->node.area);
    return 0;
}

/* A local write: once, straight into the owner's buffer. */
static int raw_send_local(struct pulc_proc *P, const PSP_RawHandle *dest, uint32_t offset,
                          const void *buf, uint32_t len)
{
    struct pulc_area *a = P->node.area;
    uint32_t num = PSP_PORTID_NUMBER(dest->port);
    int rc = pulc_area_lock(a);
    if (rc)
        return rc;
    struct pulc_msg *m = pulc_raw_reg(a, num, dest->index, dest->nonce);
    if (!m)
        rc = -ENOENT;
    else if (offset > m->total || len > m->total - offset)
        rc = -EMSGSIZE;
    else if (offset != m->received || m->frag_head != PULC_NONE)
        rc = -EINVAL; /* writes come in offset order, one writer at a time */
    int32_t pid = rc ? 0 : m->direct_pid;
    uint64_t addr = rc ? 0 : m->direct_addr + offset;
    pulc_area_unlock(a);
    if (rc)
        return rc;
    uint32_t done = 0;
    while (done < len) {
        struct iovec l = {(uint8_t *)buf + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
        ssize_t k = process_vm_writev(pid, &l, 1, &r, 1, 0);
        if (k <= 0)
            return k < 0 ? (errno == ESRCH ? -ECONNRESET : -errno) : -EIO;
        done += (uint32_t)k;
    }
    if ((rc = pulc_area_lock(a)))
        return rc;
    if (pulc_raw_reg(a, num, dest->index, dest->nonce) == m && m->received == offset) {
        __atomic_store_n(&m->taken, offset + len, __ATOMIC_RELEASE);
        __atomic_store_n(&m->received, offset + len, __ATOMIC_RELEASE);
    } else {
        rc = -ECONNRESET; /* unregistered meanwhile */
    }
    pulc_area_unlock(a);
    if (!rc)
        pulc_port_wake(a, num);
    return rc;
}

int PSP_RawSend(PSP_Port *port, const PSP_RawHandle *dest, uint32_t offset, const void *buf,
                uint32_t len, PSP_Request *req)
{
    int err = 0;
    struct pulc_proc *P = pulc_proc(&err);
    if (!P)
        return err;
    if (len && !buf)
        return -EINVAL;
    uint16_t node = PSP_PORTID_NODE(dest->port);
    const struct psp_nodes *nodes = &P->node.area->nodes;
    if (node >= nodes->count || !nodes->node[node].present)
        return -EHOSTUNREACH;
    rq_clear(req);
    req->len = len;
    if (node == P->node.node_id) {
        int rc = raw_send_local(P, dest, offset, buf, len);
        req->error = rc;
        return rc;
    }
    if ((uint64_t)offset + len > UINT32_MAX)
        return -EMSGSIZE;
    req->p_kind = PULC_PROTO_RAW;
    req->p_port = port;
    req->p_sbuf = buf;
    req->p_dest = dest->port;
    req->p_msg_id = dest->index;
    req->p_buflen = dest->nonce;
    req->p_xmax = offset;
    pulc_send_queue_remote(P, req);
    return 0;
}
