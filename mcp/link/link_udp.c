/*
 * link_udp.c — the default link: one UDP socket per node, frames as datagrams.
 *
 * The socket is bound to the node's address from the nodes table.  Frames go out in batches
 * with sendmmsg (link_sock.c) and come in with recvmmsg.  Datagrams up to 65507 bytes work over
 * any MTU (IP fragments them), so max_frame is 65507.  Datagrams from addresses outside the
 * nodes table are handed up too: the firmware checks every header.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "link.h"
#include "log.h"
#include "link_sock.h"

#define UDP_MAX_FRAME 65507u /* 65535 - 20 (IPv4) - 8 (UDP) */

struct udp_link {
    struct mcp_sock_link s; /* first member */
    struct mmsghdr rmsg[MCP_SOCK_RXBATCH];
    struct iovec riov[MCP_SOCK_RXBATCH];
    uint8_t *present;         /* per node: has an address */
    struct sockaddr_in *addr; /* per node */
};

static int udp_route(struct mcp_sock_link *s, uint16_t dst)
{
    struct udp_link *u = (struct udp_link *)s;
    return u->present[dst] ? 0 : -EHOSTUNREACH;
}

static void udp_fill(struct mcp_sock_link *s, struct mcp_sock_txent *e, struct msghdr *m)
{
    struct udp_link *u = (struct udp_link *)s;
    m->msg_name = &u->addr[e->dst];
    m->msg_namelen = sizeof u->addr[e->dst];
}

static int udp_rx(struct lanai_link *l, void *const *bufs, uint32_t cap, uint32_t *lens, int n)
{
    struct udp_link *u = (struct udp_link *)l;
    struct mcp_sock_link *s = &u->s;

    if (n <= 0)
        return 0;
    if (n > MCP_SOCK_RXBATCH)
        n = MCP_SOCK_RXBATCH;
    for (int i = 0; i < n; i++) {
        u->riov[i].iov_base = bufs[i];
        u->riov[i].iov_len = cap;
        memset(&u->rmsg[i].msg_hdr, 0, sizeof u->rmsg[i].msg_hdr);
        u->rmsg[i].msg_hdr.msg_iov = &u->riov[i];
        u->rmsg[i].msg_hdr.msg_iovlen = 1;
    }

    int r;
    for (int tries = 0;; tries++) {
        r = recvmmsg(s->fd, u->rmsg, (unsigned)n, MSG_DONTWAIT, NULL);
        if (r >= 0)
            break;
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return 0;
        if (e == EINTR)
            continue;
        if (e == EBADF || e == ENOTSOCK || e == EFAULT || e == EINVAL)
            return -e;
        /* an error the network reported (ICMP unreachable, ...): count it, read on */
        s->st.rx_errors++;
        mcp_sock_warn(s, "receive", e);
        if (tries >= 8)
            return 0;
    }
    for (int i = 0; i < r; i++) {
        uint32_t len = u->rmsg[i].msg_len;
        if (u->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) {
            lens[i] = cap + 1;
            s->st.rx_truncated++;
        } else {
            lens[i] = len;
        }
        s->st.rx_frames++;
        s->st.rx_bytes += len;
    }
    return r;
}

static void udp_close(struct lanai_link *l)
{
    struct udp_link *u = (struct udp_link *)l;
    mcp_sock_fini(&u->s);
    free(u->present);
    free(u->addr);
    free(u);
}

static const struct lanai_link_ops udp_ops = {
    .tx = mcp_sock_tx,
    .flush = mcp_sock_flush,
    .rx = udp_rx,
    .close = udp_close,
};

/* Make fd a usable datagram socket: non-blocking, close-on-exec. 0 or -errno. */
static int adopt_fd(int fd)
{
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0)
        return -errno;
    if (type != SOCK_DGRAM)
        return -ENOTSOCK;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return 0;
}

struct lanai_link *mcp_link_udp_open(const struct mcp_link_params *p, char *err, size_t errlen)
{
    if (!p || !p->nodes) {
        psp_set_err(err, errlen, "udp link: no nodes table given");
        return NULL;
    }
    const struct psp_nodes *nodes = p->nodes;
    if (p->node >= nodes->count || !nodes->node[p->node].present) {
        psp_set_err(err, errlen,
                    "udp link: node %u is not in the nodes file (it describes ids below %u): add a "
                    "line '%u <ip>[:<port>]'",
                    (unsigned)p->node, (unsigned)nodes->count, (unsigned)p->node);
        return NULL;
    }
    const struct psp_node_addr *me = &nodes->node[p->node];
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &me->ip, ip, sizeof ip);

    struct udp_link *u = calloc(1, sizeof *u);
    if (!u) {
        psp_set_err(err, errlen, "udp link: out of memory");
        return NULL;
    }
    u->s.fd = -1;
    u->present = calloc(nodes->count, 1);
    u->addr = calloc(nodes->count, sizeof *u->addr);
    if (!u->present || !u->addr) {
        psp_set_err(err, errlen, "udp link: out of memory");
        goto fail;
    }
    for (unsigned i = 0; i < nodes->count; i++) {
        if (!nodes->node[i].present)
            continue;
        u->present[i] = 1;
        u->addr[i].sin_family = AF_INET;
        u->addr[i].sin_addr = nodes->node[i].ip;
        u->addr[i].sin_port = htons(nodes->node[i].port);
    }

    int fd;
    if (p->fd >= 0) {
        fd = p->fd;
        int rc = adopt_fd(fd);
        if (rc) {
            psp_set_err(err, errlen, "udp link: descriptor %d is not a usable UDP socket: %s", fd,
                        strerror(-rc));
            goto fail;
        }
    } else {
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            psp_set_err(err, errlen, "udp link: cannot create a UDP socket: %s", strerror(errno));
            goto fail;
        }
        if (bind(fd, (struct sockaddr *)&u->addr[p->node], sizeof u->addr[p->node]) != 0) {
            int e = errno;
            close(fd);
            if (e == EADDRINUSE)
                psp_set_err(err, errlen,
                            "udp link: %s:%u is already in use (another psid for node %u running? "
                            "stop it, or choose another port with PSP_UDP_PORT or the nodes file)",
                            ip, (unsigned)me->port, (unsigned)p->node);
            else if (e == EADDRNOTAVAIL)
                psp_set_err(err, errlen,
                            "udp link: address %s of node %u is not on this host: check the nodes "
                            "file, or start this node with its own id",
                            ip, (unsigned)p->node);
            else
                psp_set_err(err, errlen, "udp link: cannot bind %s:%u: %s", ip, (unsigned)me->port,
                            strerror(e));
            goto fail;
        }
    }
    u->s.fd = fd;
    mcp_sock_buffers(fd, MCP_SOCK_BUFSIZE);
    /* Every frame carries its own CRC-32C end to end, so the UDP checksum is redundant:
     * sending without one spares the receiving kernel a checksum pass over every byte
     * (measured: about a tenth of the receiver's time in a stream). */
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof one);

    u->s.l.ops = &udp_ops;
    u->s.l.kind = "udp";
    u->s.l.max_frame = UDP_MAX_FRAME;
    u->s.l.node = p->node;
    u->s.l.max_nodes = nodes->count;
    u->s.hdr_len = 0;
    u->s.route = udp_route;
    u->s.fill = udp_fill;
    if (mcp_sock_init(&u->s, fd, &p->fault) != 0) {
        psp_set_err(err, errlen, "udp link: out of memory");
        goto fail;
    }
    return &u->s.l;

fail:
    if (p->fd >= 0)
        u->s.fd = -1; /* on failure the caller keeps its descriptor */
    mcp_sock_fini(&u->s);
    free(u->present);
    free(u->addr);
    free(u);
    return NULL;
}
