/*
 * udp-pp — the raw-link baseline of `make bench` (test/bench/run): plain sockets between two
 * hosts (two test/cluster nodes: the same veth pairs and bridge the udp link of the NIC emulation
 * uses), no psport code at all.
 *
 *   pingpong  UDP ping-pong per datagram size, busy polling (recv with MSG_DONTWAIT);
 *             latency = round trip / 2, median / mean / min / max over the timed iterations
 *             (the mean, as OSU's latency reports it, with its tail)
 *   stream    UDP stream: the client sends datagrams of one size for a given time (sendmmsg
 *             batches, blocking), the server counts what arrives; throughput = bytes received
 *             / time between the first and the last datagram received, loss = 1 - received/sent
 *   tcp       TCP stream: the client writes chunks of one size for a given time, the server
 *             reads until EOF; throughput = bytes read / time from the first byte to EOF
 *
 * The client drives the server through a TCP control connection (text lines) to the server's
 * port; UDP data goes to the same port number, TCP data connections to the same listening
 * socket.  Results are printed one per line as "TEST key=value ...", lines starting with '#'
 * are comments: the format test/bench/run parses.  MB/s = 10^6 bytes per second.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* recvmmsg, sendmmsg, SO_RCVBUFFORCE */
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT 18370
#define MAX_DGRAM    65507 /* largest UDP payload over IPv4 */
#define MAX_SIZES    64
#define MAX_BATCH    256
#define CTRL_LINE    256
#define TCP_MAX_SIZE (64 << 20)

struct options {
    bool server, forever;
    const char *peer, *bind;
    int port;
    bool t_pingpong, t_stream, t_tcp;
    long pp_sizes[MAX_SIZES], st_sizes[MAX_SIZES], tcp_sizes[MAX_SIZES];
    int n_pp, n_st, n_tcp;
    long iters, warmup;
    double seconds;
    int batch;
    int timeout;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: udp-pp --server [--port P] [--bind ADDR] [--forever] [--timeout SEC]\n"
            "       udp-pp --peer ADDR [options]\n"
            "\n"
            "Raw-link baseline: UDP ping-pong (busy polling, latency = round trip / 2), UDP\n"
            "stream (received bytes/s and loss) and TCP stream between two hosts, no psport.\n"
            "\n"
            "Options:\n"
            "      --server           serve one client (with --forever: clients until killed)\n"
            "      --peer ADDR        client: the server's IPv4 address\n"
            "  -p, --port P           control (TCP), UDP and TCP data port (default %d)\n"
            "      --bind ADDR        server: listen on ADDR only (default: any)\n"
            "      --test LIST        pingpong,stream,tcp or all (default: all)\n"
            "      --sizes LIST       ping-pong datagram sizes, 1..%d, k suffix (default:\n"
            "                         powers of 2 from 1 to 32k, and %d)\n"
            "      --stream-sizes L   UDP stream datagram sizes (default: 64,256,1024,1472,4k,\n"
            "                         8k,16k,32k,%d)\n"
            "      --tcp-sizes LIST   TCP write sizes, up to 64m (default: 64k,1m)\n"
            "      --iters N          timed ping-pong round trips per size (default 2000)\n"
            "      --warmup N         untimed round trips before them (default iters/10)\n"
            "      --time SEC         duration of each stream (default 0.5)\n"
            "      --batch N          datagrams per sendmmsg/recvmmsg, 1..%d (default 32)\n"
            "      --timeout SEC      give up after SEC seconds (default 300; 0 = never)\n"
            "  -h, --help             this text\n"
            "\n"
            "Output: one line per result, e.g.\n"
            "  pingpong size=8 iters=2000 median_us=5.10 mean_us=5.31 min_us=4.70 max_us=40.12 "
            "resent=0\n"
            "  stream size=1472 seconds=0.500 sent=N received=N loss=0.000000 MBps=900.1 "
            "send_MBps=901.0\n"
            "  tcp size=65536 seconds=0.500 bytes=N MBps=2000.0\n"
            "Exit status: 0 done, 1 a run failed, 2 usage error.\n",
            DEFAULT_PORT, MAX_DGRAM, MAX_DGRAM, MAX_DGRAM, MAX_BATCH);
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("udp-pp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "udp-pp: timeout: giving up\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(1);
}

/* Parse "N", "Nk", "Nm" into bytes; -1 when malformed. */
static long parse_size(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 0)
        return -1;
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    return *end ? -1 : v;
}

/* Parse a comma separated size list into out[]; returns the count, or -1 with a message. */
static int parse_list(const char *opt, const char *s, long lo, long hi, long *out)
{
    char buf[1024];
    int n = 0;
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long v = parse_size(t);
        if (v < lo || v > hi || n == MAX_SIZES) {
            fprintf(stderr, "udp-pp: %s: '%s' is not a size in %ld..%ld (at most %d sizes)\n", opt,
                    t, lo, hi, MAX_SIZES);
            return -1;
        }
        out[n++] = v;
    }
    return n;
}

static void set_buffers(int fd, int bytes)
{
    /* SO_*BUFFORCE passes the limits of net.core.*mem_max as root; plain ones otherwise */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

static struct sockaddr_in make_addr(const char *ip, int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (!ip)
        a.sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
        die("'%s' is not an IPv4 address", ip);
    return a;
}

/* Send a control line (adds the newline). */
static void ctrl_send(int fd, const char *fmt, ...)
{
    char line[CTRL_LINE];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    line[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = send(fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("control connection: send: %s", strerror(errno));
        off += (int)w;
    }
}

/*
 * Read one control line into line[] (without the newline).  flags MSG_DONTWAIT: returns 0 when
 * no complete line is there yet.  Returns 1 for a line, -1 on EOF or error.  Lines are short and
 * one at a time, so the bytes are peeked first and only a whole line is consumed.
 */
static int ctrl_recv(int fd, char *line, int flags)
{
    for (;;) {
        char buf[CTRL_LINE];
        ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_PEEK | flags);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0)
            return -1;
        char *nl = memchr(buf, '\n', (size_t)n);
        if (!nl) {
            if (n == (ssize_t)sizeof buf - 1)
                return -1; /* a line this long is not ours */
            if (flags & MSG_DONTWAIT)
                return 0;
            struct pollfd p = {.fd = fd, .events = POLLIN};
            (void)poll(&p, 1, 10);
            continue;
        }
        size_t len = (size_t)(nl - buf) + 1;
        if (recv(fd, buf, len, 0) != (ssize_t)len)
            return -1;
        buf[len - 1] = 0;
        strcpy(line, buf);
        return 1;
    }
}

/* Blocking control line; dies on EOF. */
static void ctrl_expect(int fd, char *line, const char *what)
{
    if (ctrl_recv(fd, line, 0) != 1)
        die("control connection closed by the server (waiting for %s)", what);
}

/* ------------------------------------------------------------------------------------------ */
/* server */

/* Echo datagrams back to their sender until the control connection says "end". */
static void serve_pingpong(int ufd, int cfd)
{
    static char buf[MAX_DGRAM];
    char line[CTRL_LINE];
    unsigned long idle = 0;
    for (;;) {
        struct sockaddr_in from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(ufd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        if (n >= 0) {
            (void)sendto(ufd, buf, (size_t)n, 0, (struct sockaddr *)&from, flen);
            continue;
        }
        if (++idle % 1024 != 0)
            continue;
        int r = ctrl_recv(cfd, line, MSG_DONTWAIT);
        if (r < 0)
            return;
        if (r > 0 && strcmp(line, "end") == 0) {
            ctrl_send(cfd, "ok");
            return;
        }
    }
}

/* Count datagrams until "done" on the control connection and a quiet 50 ms after it. */
static void serve_stream(int ufd, int cfd, int batch)
{
    static char bufs[MAX_BATCH][MAX_DGRAM];
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    for (int i = 0; i < batch; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = MAX_DGRAM;
        memset(&msgs[i], 0, sizeof msgs[i]);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    char line[CTRL_LINE];
    unsigned long long count = 0, bytes = 0, first_bytes = 0;
    double t_first = 0, t_last = 0, t_done = 0;
    unsigned long loops = 0;
    for (;;) {
        int n = recvmmsg(ufd, msgs, (unsigned)batch, MSG_DONTWAIT, NULL);
        if (n > 0) {
            double t = now_s();
            if (count == 0) {
                t_first = t;
                first_bytes = msgs[0].msg_len;
            }
            t_last = t;
            for (int i = 0; i < n; i++)
                bytes += msgs[i].msg_len;
            count += (unsigned long long)n;
        }
        if (t_done > 0) {
            double t = now_s();
            if (t - (t_last > t_done ? t_last : t_done) > 0.05)
                break;
            continue;
        }
        if (++loops % 256 != 0)
            continue;
        int r = ctrl_recv(cfd, line, MSG_DONTWAIT);
        if (r < 0)
            return;
        if (r > 0 && strncmp(line, "done", 4) == 0)
            t_done = now_s();
    }
    /* throughput over the receive span: the first datagram's bytes arrived at its start */
    double span = t_last - t_first;
    ctrl_send(cfd, "count %llu %llu %.9f", count, count > 1 ? bytes - first_bytes : 0ULL,
              count > 1 ? span : 0.0);
}

/* Accept the client's data connection and read it to EOF. */
static void serve_tcp(int lfd, int cfd, long size)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1) {
        ctrl_send(cfd, "error no data connection within 10 s");
        return;
    }
    int dfd = accept(lfd, NULL, NULL);
    if (dfd < 0) {
        ctrl_send(cfd, "error accept: %s", strerror(errno));
        return;
    }
    set_buffers(dfd, 8 << 20);
    char *buf = malloc((size_t)size);
    if (!buf)
        die("out of memory");
    unsigned long long bytes = 0, first = 0;
    double t_first = 0, t_last = 0;
    for (;;) {
        ssize_t n = recv(dfd, buf, (size_t)size, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        t_last = now_s();
        if (bytes == 0) {
            t_first = t_last;
            first = (unsigned long long)n;
        }
        bytes += (unsigned long long)n;
    }
    close(dfd);
    free(buf);
    ctrl_send(cfd, "count 0 %llu %.9f", bytes > first ? bytes - first : 0ULL,
              bytes > first ? t_last - t_first : 0.0);
}

static int run_server(const struct options *o)
{
    struct sockaddr_in a = make_addr(o->bind, o->port);
    int one = 1;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), ufd = socket(AF_INET, SOCK_DGRAM, 0);
    if (lfd < 0 || ufd < 0)
        die("socket: %s", strerror(errno));
    (void)setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 4) < 0)
        die("TCP port %d: %s", o->port, strerror(errno));
    if (bind(ufd, (struct sockaddr *)&a, sizeof a) < 0)
        die("UDP port %d: %s", o->port, strerror(errno));
    set_buffers(ufd, 16 << 20);
    fprintf(stderr, "udp-pp server: listening on %s:%d (TCP control and data, UDP data)\n",
            o->bind ? o->bind : "*", o->port);
    do {
        int cfd = accept(lfd, NULL, NULL);
        if (cfd < 0)
            die("accept: %s", strerror(errno));
        (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        char line[CTRL_LINE];
        while (ctrl_recv(cfd, line, 0) == 1) {
            long size = 0;
            int batch = 0;
            if (strcmp(line, "pingpong") == 0) {
                ctrl_send(cfd, "ok");
                serve_pingpong(ufd, cfd);
            } else if (sscanf(line, "stream %ld %d", &size, &batch) == 2 && batch >= 1 &&
                       batch <= MAX_BATCH) {
                /* drop whatever an earlier test left in the socket */
                char junk[MAX_DGRAM];
                while (recv(ufd, junk, sizeof junk, MSG_DONTWAIT) >= 0)
                    ;
                ctrl_send(cfd, "ok");
                serve_stream(ufd, cfd, batch);
            } else if (sscanf(line, "tcp %ld", &size) == 1 && size >= 1 && size <= TCP_MAX_SIZE) {
                ctrl_send(cfd, "ok");
                serve_tcp(lfd, cfd, size);
            } else if (strcmp(line, "quit") == 0) {
                break;
            } else {
                ctrl_send(cfd, "error unknown request '%s'", line);
            }
        }
        close(cfd);
    } while (o->forever);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* client */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One ping-pong size: returns 0, or -1 when the peer stopped answering. */
static int pingpong_size(int ufd, long size, long iters, long warmup, double *lat)
{
    static char sbuf[MAX_DGRAM], rbuf[MAX_DGRAM];
    memset(sbuf, 'p', (size_t)size);
    long resent = 0;
    for (long i = 0; i < warmup + iters; i++) {
        uint32_t seq = (uint32_t)i;
        if (size >= 4)
            memcpy(sbuf, &seq, 4); /* so a late echo of a resent datagram is recognised */
        double t0 = now_s(), sent_at = t0;
        if (send(ufd, sbuf, (size_t)size, 0) != size)
            die("send %ld bytes: %s", size, strerror(errno));
        for (;;) {
            ssize_t n = recv(ufd, rbuf, sizeof rbuf, MSG_DONTWAIT);
            if (n == size && (size < 4 || memcmp(rbuf, &seq, 4) == 0))
                break;
            if (n >= 0)
                continue; /* a stale echo */
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                die("recv: %s", strerror(errno));
            double t = now_s();
            if (t - sent_at > 0.2) { /* lost: send again (counted, the iteration is kept) */
                if (++resent > 100)
                    return -1;
                (void)send(ufd, sbuf, (size_t)size, 0);
                sent_at = t;
            }
        }
        if (i >= warmup)
            lat[i - warmup] = (now_s() - t0) / 2 * 1e6;
    }
    qsort(lat, (size_t)iters, sizeof *lat, cmp_double);
    double med = iters % 2 ? lat[iters / 2] : (lat[iters / 2 - 1] + lat[iters / 2]) / 2;
    double sum = 0;
    for (long k = 0; k < iters; k++)
        sum += lat[k];
    printf("pingpong size=%ld iters=%ld median_us=%.3f mean_us=%.3f min_us=%.3f max_us=%.3f "
           "resent=%ld\n",
           size, iters, med, sum / (double)iters, lat[0], lat[iters - 1], resent);
    fflush(stdout);
    return 0;
}

static int client_pingpong(const struct options *o, int cfd, const struct sockaddr_in *srv)
{
    char line[CTRL_LINE];
    int ufd = socket(AF_INET, SOCK_DGRAM, 0);
    if (ufd < 0 || connect(ufd, (const struct sockaddr *)srv, sizeof *srv) < 0)
        die("UDP socket to the server: %s", strerror(errno));
    set_buffers(ufd, 4 << 20);
    double *lat = malloc(sizeof *lat * (size_t)o->iters);
    if (!lat)
        die("out of memory");
    ctrl_send(cfd, "pingpong");
    ctrl_expect(cfd, line, "pingpong ok");
    printf("# UDP ping-pong: latency = round trip / 2 in us, %ld round trips per size after %ld "
           "warm-up ones, busy polling\n",
           o->iters, o->warmup);
    int rc = 0;
    for (int i = 0; i < o->n_pp && rc == 0; i++) {
        rc = pingpong_size(ufd, o->pp_sizes[i], o->iters, o->warmup, lat);
        if (rc)
            fprintf(stderr, "udp-pp: ping-pong %ld B: no answer after 100 resends\n",
                    o->pp_sizes[i]);
    }
    ctrl_send(cfd, "end");
    ctrl_expect(cfd, line, "end of ping-pong");
    free(lat);
    close(ufd);
    return rc;
}

static int client_stream(const struct options *o, int cfd, const struct sockaddr_in *srv)
{
    static char bufs[MAX_DGRAM];
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov;
    char line[CTRL_LINE];
    int rc = 0;
    printf("# UDP stream: datagrams of one size for %.3f s, sendmmsg batches of %d; MBps = bytes "
           "received / receive span, loss = 1 - received / sent\n",
           o->seconds, o->batch);
    for (int s = 0; s < o->n_st; s++) {
        long size = o->st_sizes[s];
        int ufd = socket(AF_INET, SOCK_DGRAM, 0);
        if (ufd < 0 || connect(ufd, (const struct sockaddr *)srv, sizeof *srv) < 0)
            die("UDP socket to the server: %s", strerror(errno));
        set_buffers(ufd, 4 << 20);
        memset(bufs, 's', (size_t)size);
        iov.iov_base = bufs;
        iov.iov_len = (size_t)size;
        for (int i = 0; i < o->batch; i++) {
            memset(&msgs[i], 0, sizeof msgs[i]);
            msgs[i].msg_hdr.msg_iov = &iov;
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        ctrl_send(cfd, "stream %ld %d", size, o->batch);
        ctrl_expect(cfd, line, "stream ok");
        unsigned long long sent = 0, errors = 0;
        double t0 = now_s(), t = t0;
        while (t - t0 < o->seconds) {
            int n = sendmmsg(ufd, msgs, (unsigned)o->batch, 0);
            if (n > 0)
                sent += (unsigned long long)n;
            else if (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED)
                errors++; /* counts as not sent; the socket recovers */
            else
                die("sendmmsg: %s", strerror(errno));
            t = now_s();
        }
        double send_time = t - t0;
        ctrl_send(cfd, "done %llu", sent);
        ctrl_expect(cfd, line, "stream count");
        unsigned long long count = 0, bytes = 0;
        double span = 0;
        if (sscanf(line, "count %llu %llu %lf", &count, &bytes, &span) != 3) {
            fprintf(stderr, "udp-pp: stream %ld B: server said '%s'\n", size, line);
            rc = 1;
        } else {
            double loss = sent ? 1.0 - (double)count / (double)sent : 0;
            printf("stream size=%ld seconds=%.3f sent=%llu received=%llu loss=%.6f MBps=%.2f "
                   "send_MBps=%.2f\n",
                   size, send_time, sent, count, loss < 0 ? 0 : loss,
                   span > 0 ? (double)bytes / span / 1e6 : 0,
                   (double)sent * (double)size / send_time / 1e6);
            if (count < 2) {
                fprintf(stderr, "udp-pp: stream %ld B: the server received %llu datagrams\n", size,
                        count);
                rc = 1;
            }
        }
        fflush(stdout);
        close(ufd);
    }
    return rc;
}

static int client_tcp(const struct options *o, int cfd, const struct sockaddr_in *srv)
{
    char line[CTRL_LINE];
    int rc = 0;
    printf("# TCP stream: writes of one size for %.3f s; MBps = bytes read / time from the first "
           "byte to EOF at the server\n",
           o->seconds);
    for (int s = 0; s < o->n_tcp; s++) {
        long size = o->tcp_sizes[s];
        char *buf = malloc((size_t)size);
        if (!buf)
            die("out of memory");
        memset(buf, 't', (size_t)size);
        ctrl_send(cfd, "tcp %ld", size);
        ctrl_expect(cfd, line, "tcp ok");
        int dfd = socket(AF_INET, SOCK_STREAM, 0);
        if (dfd < 0)
            die("socket: %s", strerror(errno));
        set_buffers(dfd, 8 << 20);
        if (connect(dfd, (const struct sockaddr *)srv, sizeof *srv) < 0)
            die("TCP data connection: %s", strerror(errno));
        unsigned long long bytes = 0;
        double t0 = now_s(), t = t0;
        while (t - t0 < o->seconds) {
            for (long off = 0; off < size;) {
                ssize_t w = send(dfd, buf + off, (size_t)(size - off), MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    die("TCP send: %s", strerror(errno));
                off += w;
            }
            bytes += (unsigned long long)size;
            t = now_s();
        }
        shutdown(dfd, SHUT_WR);
        ctrl_expect(cfd, line, "tcp count");
        close(dfd);
        unsigned long long count = 0, got = 0;
        double span = 0;
        if (sscanf(line, "count %llu %llu %lf", &count, &got, &span) != 3 || span <= 0) {
            fprintf(stderr, "udp-pp: tcp %ld B: server said '%s'\n", size, line);
            rc = 1;
        } else {
            printf("tcp size=%ld seconds=%.3f bytes=%llu MBps=%.2f\n", size, t - t0, bytes,
                   (double)got / span / 1e6);
        }
        fflush(stdout);
        free(buf);
    }
    return rc;
}

static int run_client(const struct options *o)
{
    struct sockaddr_in srv = make_addr(o->peer, o->port);
    int cfd = -1, one = 1;
    /* the server may still be starting: try for up to 5 s */
    for (int tries = 0; tries < 100; tries++) {
        cfd = socket(AF_INET, SOCK_STREAM, 0);
        if (cfd < 0)
            die("socket: %s", strerror(errno));
        if (connect(cfd, (struct sockaddr *)&srv, sizeof srv) == 0)
            break;
        close(cfd);
        cfd = -1;
        usleep(50000);
    }
    if (cfd < 0)
        die("no server at %s:%d: %s", o->peer, o->port, strerror(errno));
    (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    printf("# udp-pp client: server %s:%d\n", o->peer, o->port);
    int rc = 0;
    if (o->t_pingpong)
        rc |= client_pingpong(o, cfd, &srv);
    if (o->t_stream)
        rc |= client_stream(o, cfd, &srv);
    if (o->t_tcp)
        rc |= client_tcp(o, cfd, &srv);
    ctrl_send(cfd, "quit");
    close(cfd);
    printf(rc ? "udp-pp: a run failed\n" : "udp-pp: done\n");
    return rc ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */

static int default_sizes(struct options *o)
{
    o->n_pp = 0;
    for (long s = 1; s <= 32768; s *= 2)
        o->pp_sizes[o->n_pp++] = s;
    o->pp_sizes[o->n_pp++] = MAX_DGRAM;
    static const long st[] = {64, 256, 1024, 1472, 4096, 8192, 16384, 32768, MAX_DGRAM};
    o->n_st = (int)(sizeof st / sizeof st[0]);
    memcpy(o->st_sizes, st, sizeof st);
    o->tcp_sizes[0] = 64 << 10;
    o->tcp_sizes[1] = 1 << 20;
    o->n_tcp = 2;
    return 0;
}

int main(int argc, char **argv)
{
    struct options o = {.port = DEFAULT_PORT,
                        .t_pingpong = true,
                        .t_stream = true,
                        .t_tcp = true,
                        .iters = 2000,
                        .warmup = -1,
                        .seconds = 0.5,
                        .batch = 32,
                        .timeout = 300};
    default_sizes(&o);
    enum {
        O_SERVER = 256,
        O_FOREVER,
        O_PEER,
        O_BIND,
        O_TEST,
        O_SIZES,
        O_SSIZES,
        O_TSIZES,
        O_ITERS,
        O_WARMUP,
        O_TIME,
        O_BATCH,
        O_TIMEOUT
    };
    static const struct option lopts[] = {
        {"server", no_argument, 0, O_SERVER},
        {"forever", no_argument, 0, O_FOREVER},
        {"peer", required_argument, 0, O_PEER},
        {"port", required_argument, 0, 'p'},
        {"bind", required_argument, 0, O_BIND},
        {"test", required_argument, 0, O_TEST},
        {"sizes", required_argument, 0, O_SIZES},
        {"stream-sizes", required_argument, 0, O_SSIZES},
        {"tcp-sizes", required_argument, 0, O_TSIZES},
        {"iters", required_argument, 0, O_ITERS},
        {"warmup", required_argument, 0, O_WARMUP},
        {"time", required_argument, 0, O_TIME},
        {"batch", required_argument, 0, O_BATCH},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, ":p:h", lopts, NULL)) != -1;) {
        char *end = NULL;
        switch (c) {
        case O_SERVER:
            o.server = true;
            break;
        case O_FOREVER:
            o.forever = true;
            break;
        case O_PEER:
            o.peer = optarg;
            break;
        case 'p':
            o.port = (int)strtol(optarg, &end, 10);
            if (*end || o.port < 1 || o.port > 65535)
                goto bad_value;
            break;
        case O_BIND:
            o.bind = optarg;
            break;
        case O_TEST: {
            o.t_pingpong = o.t_stream = o.t_tcp = false;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                if (!strcmp(t, "pingpong"))
                    o.t_pingpong = true;
                else if (!strcmp(t, "stream"))
                    o.t_stream = true;
                else if (!strcmp(t, "tcp"))
                    o.t_tcp = true;
                else if (!strcmp(t, "all"))
                    o.t_pingpong = o.t_stream = o.t_tcp = true;
                else
                    goto bad_value;
            }
            break;
        }
        case O_SIZES:
            if ((o.n_pp = parse_list("--sizes", optarg, 1, MAX_DGRAM, o.pp_sizes)) < 1)
                return 2;
            break;
        case O_SSIZES:
            if ((o.n_st = parse_list("--stream-sizes", optarg, 1, MAX_DGRAM, o.st_sizes)) < 1)
                return 2;
            break;
        case O_TSIZES:
            if ((o.n_tcp = parse_list("--tcp-sizes", optarg, 1, TCP_MAX_SIZE, o.tcp_sizes)) < 1)
                return 2;
            break;
        case O_ITERS:
            o.iters = strtol(optarg, &end, 10);
            if (*end || o.iters < 1 || o.iters > 100000000)
                goto bad_value;
            break;
        case O_WARMUP:
            o.warmup = strtol(optarg, &end, 10);
            if (*end || o.warmup < 0)
                goto bad_value;
            break;
        case O_TIME:
            o.seconds = strtod(optarg, &end);
            if (*end || !(o.seconds > 0 && o.seconds <= 3600))
                goto bad_value;
            break;
        case O_BATCH:
            o.batch = (int)strtol(optarg, &end, 10);
            if (*end || o.batch < 1 || o.batch > MAX_BATCH)
                goto bad_value;
            break;
        case O_TIMEOUT:
            o.timeout = (int)strtol(optarg, &end, 10);
            if (*end || o.timeout < 0)
                goto bad_value;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            fprintf(stderr, "udp-pp: option '%s' needs an argument\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        default:
            fprintf(stderr, "udp-pp: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        continue;
    bad_value:
        fprintf(stderr, "udp-pp: bad value '%s' for %s\n", optarg, argv[optind - 1]);
        return 2;
    }
    if (optind < argc || o.server == (o.peer != NULL)) {
        fprintf(stderr, "udp-pp: give either --server or --peer ADDR\n");
        usage(stderr);
        return 2;
    }
    if (o.warmup < 0)
        o.warmup = o.iters / 10 > 100 ? 100 : o.iters / 10;
    signal(SIGALRM, on_alarm);
    if (o.timeout > 0 && !o.forever)
        alarm((unsigned)o.timeout);
    return o.server ? run_server(&o) : run_client(&o);
}
