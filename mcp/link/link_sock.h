/*
 * link_sock.h — private: what the udp and eth links share (not for use outside mcp/link/).
 *
 * A transmit queue of frame references (the firmware's memory stays valid until flush, so no
 * copy), fault injection on transmit (a corrupted frame is copied into a scratch area first, the
 * caller's memory is never changed), and a flush with sendmmsg that never blocks and never
 * loses a frame silently.
 */
#ifndef PSPORT_MCP_LINK_SOCK_H
#define PSPORT_MCP_LINK_SOCK_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "link.h"

#define MCP_SOCK_TXQ     256       /* frames queued before tx() answers -EAGAIN */
#define MCP_SOCK_RXBATCH 64        /* frames taken per rx() call at most */
#define MCP_SOCK_BUFSIZE (8 << 20) /* socket buffers asked for (forced when root) */
#define MCP_SOCK_SCRATCH (1 << 20) /* scratch bytes for corrupted copies (at least 2 frames) */

struct mcp_sock_txent {
    const uint8_t *frame;
    uint32_t len;
    uint16_t dst;
    uint8_t hdr[14]; /* link header in front of the frame (eth), built by fill() */
};

struct mcp_sock_link {
    struct lanai_link l; /* first member: the firmware's view */
    int fd;
    uint16_t hdr_len; /* bytes of hdr[] sent in front of each frame */
    int fault_on;
    struct mcp_fault fault;
    struct mcp_link_stats st;
    /* 0 if dst can be reached, else a negative errno (counted in tx_no_route) */
    int (*route)(struct mcp_sock_link *s, uint16_t dst);
    /* set the message's address and hdr[] for entry e (iov is filled by the core) */
    void (*fill)(struct mcp_sock_link *s, struct mcp_sock_txent *e, struct msghdr *m);
    /* optional: called after the core filled message i of a batch for e, the first of avail
     * queued entries; may replace its iov and add control data (the udp link's segments) and
     * put the entries after e into it too (the udp link's packing): returns how many entries
     * message i carries, at least 1 */
    unsigned (*prepare)(struct mcp_sock_link *s, unsigned i, struct mcp_sock_txent *e,
                        unsigned avail, struct msghdr *m);
    /* optional: the kernel refused the message that starts with e for good with err; 1 = try
     * again (the link changed how it sends, e.g. gave up segmentation), 0 = count e and skip
     * it (the rest of its message goes again) */
    int (*refused)(struct mcp_sock_link *s, struct mcp_sock_txent *e, int err);
    /* optional: the socket the message starting with e goes through (NULL: fd); consecutive
     * messages through one socket share a sendmmsg.  A pure function of e's length and
     * destination: the entries prepare() puts into the message go the same way */
    int (*fd_for)(struct mcp_sock_link *s, const struct mcp_sock_txent *e);
    unsigned head, tail; /* queued: q[head .. tail-1] */
    struct mcp_sock_txent q[MCP_SOCK_TXQ];
    uint16_t span[MCP_SOCK_TXQ]; /* entries each message of the batch carries */
    struct mmsghdr msg[MCP_SOCK_TXQ];
    struct iovec iov[MCP_SOCK_TXQ][2];
    uint8_t *scratch;
    size_t scratch_size, scratch_used;
    uint64_t warned; /* errors logged so far (rate limit) */
};

/*
 * Set up the common part: fd (owned from now on), fault injection from cfg (the generator's
 * seed is mixed with the node id, so nodes with one seed still decide independently).
 * Returns 0 or -ENOMEM (the caller then closes what it opened).
 */
int mcp_sock_init(struct mcp_sock_link *s, int fd, const struct mcp_fault_cfg *cfg);

/* Release what mcp_sock_init() set up and close the socket. Does not free s. */
void mcp_sock_fini(struct mcp_sock_link *s);

/* lanai ops shared by udp and eth. */
int mcp_sock_tx(struct lanai_link *l, uint16_t dst, const void *frame, uint32_t len);
int mcp_sock_flush(struct lanai_link *l);

/* Ask for large socket buffers (SO_*BUFFORCE when allowed, else up to the sysctl limits). */
void mcp_sock_buffers(int fd, int bytes);

/* Log a socket error with rate limiting (the first ones, then every 1024th). */
void mcp_sock_warn(struct mcp_sock_link *s, const char *what, int err);

/* Copy a received frame of len bytes from f into out (the firmware's buffer); with fcs, set
 * *fcs as lanai.h's rx_fcs says, the CRC taken in the copy (mcp_crc32c_copy). */
void mcp_sock_copy_frame(uint8_t *out, const uint8_t *f, uint32_t len, uint64_t *fcs);

#endif
