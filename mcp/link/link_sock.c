/*
 * link_sock.c — transmit queue, fault injection and batched sending for the udp and eth links.
 */
#include "link_sock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"

int mcp_sock_init(struct mcp_sock_link *s, int fd, const struct mcp_fault_cfg *cfg)
{
    s->fd = fd;
    s->head = s->tail = 0;
    s->scratch = NULL;
    s->scratch_size = s->scratch_used = 0;
    s->fault_on = cfg && mcp_fault_active(cfg);
    if (s->fault_on) {
        struct mcp_fault_cfg c = *cfg;
        c.seed ^= (uint64_t)(s->l.node + 1) * 0x9E3779B97F4A7C15ull;
        mcp_fault_init(&s->fault, &c);
        if (c.corrupt > 0) {
            size_t sz = MCP_SOCK_SCRATCH;
            if (sz < 2 * (size_t)s->l.max_frame)
                sz = 2 * (size_t)s->l.max_frame;
            s->scratch = malloc(sz);
            if (!s->scratch)
                return -ENOMEM;
            s->scratch_size = sz;
        }
    }
    return 0;
}

void mcp_sock_fini(struct mcp_sock_link *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    free(s->scratch);
    s->scratch = NULL;
    s->head = s->tail = 0;
}

void mcp_sock_buffers(int fd, int bytes)
{
    /* as root the FORCE variants pass the net.core.*mem_max limits; else take what we get */
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

void mcp_sock_warn(struct mcp_sock_link *s, const char *what, int err)
{
    uint64_t n = s->warned++;
    if (n < 8 || (n & 1023) == 0)
        PSP_WARN("%s link of node %u: %s: %s (errors so far: %llu)", s->l.kind, (unsigned)s->l.node,
                 what, strerror(err), (unsigned long long)(n + 1));
}

static void enqueue(struct mcp_sock_link *s, uint16_t dst, const uint8_t *frame, uint32_t len)
{
    struct mcp_sock_txent *e = &s->q[s->tail++];
    e->frame = frame;
    e->len = len;
    e->dst = dst;
}

int mcp_sock_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len)
{
    struct mcp_sock_link *s = (struct mcp_sock_link *)l;
    const uint8_t *f = frame;

    if (dst >= l->max_nodes || !frame || len == 0)
        return -EINVAL;
    if (len > l->max_frame) {
        s->st.tx_errors++;
        return -EMSGSIZE;
    }
    int rc = s->route(s, dst);
    if (rc) {
        s->st.tx_no_route++;
        return rc;
    }

    unsigned need = s->fault_on ? 2 : 1; /* room for a duplicate */
    if (s->tail + need > MCP_SOCK_TXQ && s->head > 0) {
        memmove(&s->q[0], &s->q[s->head], (s->tail - s->head) * sizeof s->q[0]);
        s->tail -= s->head;
        s->head = 0;
    }
    if (s->tail + need > MCP_SOCK_TXQ || (s->scratch && s->scratch_used + len > s->scratch_size)) {
        s->st.tx_busy++;
        return -EAGAIN;
    }

    if (!s->fault_on) {
        enqueue(s, dst, f, len);
        return 0;
    }

    struct mcp_fault_verdict v;
    mcp_fault_decide(&s->fault, len > 3 ? f[3] : 0, len, &v);
    if (v.drop) {
        s->st.fault_dropped++;
        return 0;
    }
    if (v.corrupt && s->scratch) {
        uint8_t *c = s->scratch + s->scratch_used;
        s->scratch_used += len;
        memcpy(c, f, len);
        c[v.corrupt_at] ^= v.corrupt_mask;
        s->st.fault_corrupted++;
        enqueue(s, dst, c, len);
    } else {
        enqueue(s, dst, f, len);
    }
    if (v.dup) {
        s->st.fault_duplicated++;
        enqueue(s, dst, f, len); /* the second copy is the intact frame */
    }
    return 0;
}

/* Frame q[head] was refused for good with err: count it and move past it. */
static void skip_failed(struct mcp_sock_link *s, int err)
{
    char what[64];
    snprintf(what, sizeof what, "frame to node %u not sent", (unsigned)s->q[s->head].dst);
    s->st.tx_errors++;
    mcp_sock_warn(s, what, err);
    s->head++;
}

static int transient(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS || err == EINTR;
}

int mcp_sock_flush(struct lanai_link *l)
{
    struct mcp_sock_link *s = (struct mcp_sock_link *)l;
    int sent = 0;

    while (s->head < s->tail) {
        unsigned k = s->tail - s->head, nmsg = 0;
        int fd = s->fd_for ? s->fd_for(s, &s->q[s->head]) : s->fd;
        for (unsigned i = 0; i < k; nmsg++) {
            struct mcp_sock_txent *e = &s->q[s->head + i];
            if (nmsg && s->fd_for && s->fd_for(s, e) != fd)
                break; /* the rest goes through the other socket, in the next call */
            struct msghdr *m = &s->msg[nmsg].msg_hdr;
            memset(m, 0, sizeof *m);
            s->fill(s, e, m);
            struct iovec *iov = s->iov[nmsg];
            int niov = 0;
            if (s->hdr_len) {
                iov[niov].iov_base = e->hdr;
                iov[niov++].iov_len = s->hdr_len;
            }
            iov[niov].iov_base = (void *)e->frame;
            iov[niov++].iov_len = e->len;
            m->msg_iov = iov;
            m->msg_iovlen = (size_t)niov;
            unsigned span = s->prepare ? s->prepare(s, nmsg, e, k - i, m) : 1;
            s->span[nmsg] = (uint16_t)span;
            i += span;
        }

        int r = sendmmsg(fd, s->msg, nmsg, MSG_DONTWAIT);
        s->st.tx_calls++;
        if (r < 0) {
            int e = errno;
            if (e == EINTR)
                continue;
            if (transient(e)) {
                /* Socket buffer full: the rest is lost like frames on a congested wire.
                 * Keeping it queued would keep references to frame memory the firmware
                 * reuses after flush (lanai.h); its retransmission recovers them. */
                s->st.tx_dropped_full += s->tail - s->head;
                s->head = s->tail;
                break;
            }
            if (e == EBADF || e == ENOTSOCK || e == EFAULT)
                return -e; /* not the frame's fault: the link itself is broken */
            if (s->refused && s->refused(s, &s->q[s->head], e))
                continue;
            skip_failed(s, e);
            continue;
        }
        unsigned frames = 0;
        for (int j = 0; j < r; j++)
            for (unsigned f = 0; f < s->span[j]; f++, frames++) {
                s->st.tx_frames++;
                s->st.tx_bytes += s->q[s->head + frames].len;
            }
        s->head += frames;
        sent += (int)frames;
        if ((unsigned)r == nmsg)
            continue; /* all of the batch went (a change of socket may have left more) */
        /* Partial send: the first unsent frame failed.  Some kernels keep its error as a
         * pending socket error: fetch (and clear) it, so that it cannot be blamed on a later
         * frame.  Then try the rest again: a frame that cannot go fails at once and is
         * skipped, a full buffer (EAGAIN) ends this flush. */
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
            soerr = 0;
        if (soerr && !transient(soerr) && !(s->refused && s->refused(s, &s->q[s->head], soerr)))
            skip_failed(s, soerr);
    }
    s->head = s->tail = 0;
    s->scratch_used = 0; /* no queued frame points into it any more */
    return sent;
}

void mcp_sock_copy_frame(uint8_t *out, const uint8_t *f, uint32_t len, uint64_t *fcs)
{
    if (!fcs || len < LANAI_FCS_SKIP) {
        memcpy(out, f, len);
        if (fcs)
            *fcs = 0;
        return;
    }
    memcpy(out, f, LANAI_FCS_SKIP);
    *fcs = LANAI_FCS_VALID |
           mcp_crc32c_copy(0, out + LANAI_FCS_SKIP, f + LANAI_FCS_SKIP, len - LANAI_FCS_SKIP);
}
