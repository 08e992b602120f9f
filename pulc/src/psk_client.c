/*
 * psk_client.c — psid's socket protocol, client side.
 */
#include "psk_client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "psport_abi.h"

int pulc_psk_connect(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    if (strlen(path) >= sizeof sa.sun_path) {
        psp_set_err(err, errlen, "psid socket path %s is too long (at most %zu bytes)", path,
                    sizeof sa.sun_path - 1);
        return -ENAMETOOLONG;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        psp_set_err(err, errlen, "cannot create a UNIX socket: %s", strerror(e));
        return -e;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        close(fd);
        if (e == ENOENT || e == ENOTDIR)
            psp_set_err(err, errlen,
                        "psid is not running (no socket at %s): start it with `psid` (or set "
                        "PSP_PSID_SOCKET)",
                        path);
        else if (e == ECONNREFUSED)
            psp_set_err(err, errlen,
                        "psid is not running (nobody listens on %s): start it with `psid` (or "
                        "set PSP_PSID_SOCKET)",
                        path);
        else if (e == EACCES)
            psp_set_err(err, errlen,
                        "cannot connect to psid at %s: permission denied (check the socket's "
                        "directory permissions)",
                        path);
        else
            psp_set_err(err, errlen, "cannot connect to psid at %s: %s", path, strerror(e));
        return -e;
    }
    return fd;
}

/* Read exactly n bytes (the first read may bring descriptors). 0 or a negative errno. */
static int read_full(int sock, void *buf, size_t n, int *fds, int nfds)
{
    size_t done = 0;
    while (done < n) {
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int) * PULC_PSK_MAX_FDS)];
        } cbuf;
        struct iovec iov = {(char *)buf + done, n - done};
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = cbuf.buf;
        m.msg_controllen = sizeof cbuf.buf;
        ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ECONNRESET;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int in[PULC_PSK_MAX_FDS];
            if (k > PULC_PSK_MAX_FDS)
                k = PULC_PSK_MAX_FDS;
            memcpy(in, CMSG_DATA(c), (size_t)k * sizeof(int));
            for (int i = 0; i < k; i++) {
                if (i < nfds && fds && fds[i] < 0)
                    fds[i] = in[i];
                else
                    close(in[i]);
            }
        }
        done += (size_t)r;
    }
    return 0;
}

static int write_full(int sock, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = send(sock, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        done += (size_t)r;
    }
    return 0;
}

int pulc_psk_call(int sock, uint32_t op, uint32_t abi, const void *req, uint32_t reqlen, void *rep,
                  uint32_t replen, uint32_t *got, int *fds, int nfds, char *err, size_t errlen)
{
    for (int i = 0; i < nfds; i++)
        fds[i] = -1;
    struct psk_msg m = {PSK_MSG_MAGIC, abi, op, 0, reqlen, 0};
    int rc = write_full(sock, &m, sizeof m);
    if (!rc && reqlen)
        rc = write_full(sock, req, reqlen);
    if (rc) {
        psp_set_err(err, errlen, "cannot send a request to psid: %s", strerror(-rc));
        return rc;
    }
    struct psk_msg r;
    rc = read_full(sock, &r, sizeof r, fds, nfds);
    if (rc) {
        psp_set_err(err, errlen, "psid closed the connection without a reply (%s): see its log",
                    strerror(-rc));
        return rc;
    }
    if (r.magic != PSK_MSG_MAGIC || r.len > PULC_PSK_REPLY_MAX) {
        psp_set_err(err, errlen, "psid sent a malformed reply (magic 0x%08x, %u bytes)", r.magic,
                    r.len);
        return -EPROTO;
    }
    char payload[4096];
    uint32_t left = r.len, kept = 0;
    while (left) {
        uint32_t n = left < sizeof payload ? left : (uint32_t)sizeof payload;
        rc = read_full(sock, payload, n, fds, nfds);
        if (rc) {
            psp_set_err(err, errlen, "psid closed the connection during a reply: %s",
                        strerror(-rc));
            return rc;
        }
        if (r.op == PSK_OP_ERROR) {
            if (kept == 0)
                psp_set_err(err, errlen, "%.*s", (int)n, payload);
            kept += n;
        } else if (rep && kept < replen) {
            uint32_t c = replen - kept < n ? replen - kept : n;
            memcpy((char *)rep + kept, payload, c);
            kept += c;
        }
        left -= n;
    }
    if (r.op == PSK_OP_ERROR || r.status < 0) {
        if (r.len == 0)
            psp_set_err(err, errlen, "psid refused: %s", strerror(r.status < 0 ? -r.status : EIO));
        for (int i = 0; i < nfds; i++)
            if (fds[i] >= 0) {
                close(fds[i]);
                fds[i] = -1;
            }
        return r.status < 0 ? r.status : -EIO;
    }
    if (got)
        *got = r.len;
    return 0;
}
