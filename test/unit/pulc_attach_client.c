/*
 * pulc_attach_client — a PULC client for the psid tests (test/integration/psid-basic).
 *
 *   pulc_attach_client info                 attach, print node and context, detach
 *   pulc_attach_client hold                 attach, print "attached ctx C pid P", sleep
 *   pulc_attach_client send DST N SIZE      send N port-D messages of SIZE bytes to port 7 of
 *                                           node DST and wait until all are acknowledged
 *   pulc_attach_client recv SRC N SIZE      open port 7, print "ready", receive N messages
 *                                           from node SRC and verify them
 *   pulc_attach_client waitrecv SRC N SIZE  the same, also printing its CPU and wall time
 *                                           (PSP_Wait spins, yields, then sleeps)
 *   pulc_attach_client lockdie              attach, take the NIC lock and die holding it
 *   pulc_attach_client unknownproto DST     send node DST one frame of a protocol nobody
 *                                           there handles (a HAL-level client's) and wait
 *                                           until the NIC acknowledged it
 *   pulc_attach_client stall MS             (no attach) send psid 10 bytes of an INFO
 *                                           request, print "stalled", wait MS ms, send the
 *                                           rest and print "served node N" from the reply
 * Message i carries bytes (i * 131 + k * 7 + 1) & 0xff, its index in the first 4 bytes.
 * Built a second time with -DPULC_TEST_ABI_VERSION=99 to announce a foreign ABI version.
 * Exit: 0 ok, 1 failure (message on stderr); send and recv are killed by SIGALRM after 120 s.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "hal.h"
#include "mcp_env.h"
#include "proto.h"
#include "psk_client.h"
#include "pulc.h"
#include "settings.h"

#define TIMEOUT_NS (30ull * 1000000000ull)

static uint8_t pattern(uint32_t i, uint32_t k)
{
    return (uint8_t)((i * 131u + k * 7u + 1u) & 0xffu);
}

static void fill(uint8_t *b, uint32_t i, uint32_t size)
{
    for (uint32_t k = 0; k < size; k++)
        b[k] = pattern(i, k);
    if (size >= 4)
        memcpy(b, &i, 4);
}

#define TEST_PORT 7 /* the receiver's port-D port */

/* b: size bytes of scratch.  Messages to port TEST_PORT of node dst (port-D). */
static int do_send(uint8_t *b, uint16_t dst, uint32_t n, uint32_t size)
{
    PSP_Port *p = NULL;
    int rc = PSP_OpenPort(PSP_ANYPORT, PSP_PORT_D, &p);
    if (rc) {
        fprintf(stderr, "open port: %s\n", PSP_StrError(rc));
        return 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        fill(b, i, size);
        rc = PSP_Send(p, PSP_PORTID(dst, TEST_PORT), NULL, 0, b, size);
        if (!rc)
            rc = PSP_GetPortError(p, NULL);
        if (rc) {
            fprintf(stderr, "send of message %u failed: %s\n", i, strerror(-rc));
            return 1;
        }
    }
    /* Everything acknowledged by the receiving NIC, and no error came back. */
    uint64_t t0 = mcp_now_ns();
    while (pulc_hal_send_busy(pulc_hal_self()) && mcp_now_ns() - t0 < TIMEOUT_NS)
        PSP_Progress();
    usleep(100000);
    PSP_Progress();
    if ((rc = PSP_GetPortError(p, NULL)) != 0) {
        fprintf(stderr, "a message failed: %s\n", strerror(-rc));
        return 1;
    }
    printf("sent %u messages of %u bytes to node %u\n", n, size, dst);
    PSP_ClosePort(p);
    return 0;
}

/*
 * want: size bytes of scratch.  Receive n messages on port TEST_PORT (printing "ready" once it
 * is open) and verify source node, length and content.  PSP_Wait waits the co-scheduling way
 * (spin, yield, sleep); with report the CPU and wall time are printed ("cpu MS wall MS").
 */
static int do_recv(uint8_t *want, uint16_t src, uint32_t n, uint32_t size, int report)
{
    PSP_Port *p = NULL;
    int rc = PSP_OpenPort(TEST_PORT, PSP_PORT_D, &p);
    if (rc) {
        fprintf(stderr, "open port %d: %s\n", TEST_PORT, PSP_StrError(rc));
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    uint8_t *got_buf = malloc(size + 1);
    struct timespec w0, w1;
    struct rusage r0, r1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    getrusage(RUSAGE_SELF, &r0);
    for (uint32_t got = 0; got < n; got++) {
        PSP_Request r;
        rc = PSP_IReceive(p, NULL, 0, got_buf, size + 1, NULL, NULL, &r);
        if (!rc)
            rc = PSP_Wait(&r, 30000);
        if (rc) {
            fprintf(stderr, "received %u of %u messages: %s\n", got, n, strerror(-rc));
            return 1;
        }
        uint32_t carried = 0;
        if (r.len >= 4)
            memcpy(&carried, got_buf, 4);
        fill(want, report ? carried : got, size); /* waitrecv: one message per sender */
        if (PSP_PORTID_NODE(r.src) != src || r.len != size || memcmp(got_buf, want, size) != 0) {
            uint32_t idx = 0, at = 0;
            if (r.len >= 4)
                memcpy(&idx, got_buf, 4);
            while (at < r.len && at < size && got_buf[at] == want[at])
                at++;
            fprintf(stderr,
                    "message %u: from node %u, %u bytes, carries index %u, first difference at "
                    "byte %u: %s\n",
                    got, PSP_PORTID_NODE(r.src), r.len, idx, at,
                    PSP_PORTID_NODE(r.src) != src || r.len != size ? "wrong source or length"
                                                                   : "content differs");
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    getrusage(RUSAGE_SELF, &r1);
    free(got_buf);
    if (!report) {
        printf("received %u messages of %u bytes from node %u: content verified\n", n, size, src);
        return 0;
    }
    double wall = (double)(w1.tv_sec - w0.tv_sec) * 1e3 + (double)(w1.tv_nsec - w0.tv_nsec) / 1e6;
    double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
                          r0.ru_stime.tv_sec) *
                     1e3 +
                 (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
                          r0.ru_stime.tv_usec) /
                     1e3;
    printf("received %u messages of %u bytes from node %u: content verified; cpu %.0f wall %.0f\n",
           n, size, src, cpu, wall);
    return 0;
}

/* A client that stops in the middle of its request, then finishes it: psid must serve the
 * others meanwhile, and this one afterwards. */
static int do_stall(unsigned ms)
{
    char err[256];
    int fd = pulc_psk_connect(psp_setting_str("PSP_PSID_SOCKET"), err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    struct psk_msg m = {PSK_MSG_MAGIC, PSK_ABI_VERSION, PSK_OP_INFO, 0, 0, 0};
    const char *b = (const char *)&m;
    if (write(fd, b, 10) != 10) {
        perror("write");
        return 1;
    }
    printf("stalled\n");
    fflush(stdout);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    if (write(fd, b + 10, sizeof m - 10) != (ssize_t)(sizeof m - 10)) {
        perror("write (the rest)");
        return 1;
    }
    struct psk_msg rep;
    struct psk_info in;
    if (read(fd, &rep, sizeof rep) != (ssize_t)sizeof rep || rep.magic != PSK_MSG_MAGIC ||
        rep.op != PSK_OP_INFO || rep.status != 0 || rep.len < sizeof in ||
        read(fd, &in, sizeof in) != (ssize_t)sizeof in) {
        fprintf(stderr, "no INFO reply after the stall (psid closed the connection?)\n");
        return 1;
    }
    printf("served node %u\n", (unsigned)in.node_id);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s info | hold | send DST N SIZE | recv SRC N SIZE | stall MS\n",
                argv[0]);
        return 2;
    }
    if (argc == 3 && !strcmp(argv[1], "stall"))
        return do_stall((unsigned)atoi(argv[2]));
#ifdef PULC_TEST_ABI_VERSION
    int rc = pulc_init_abi(PULC_TEST_ABI_VERSION);
#else
    int rc = PSP_Init();
#endif
    if (rc) {
        fprintf(stderr, "PSP_Init: %s\n", PSP_StrError(rc));
        return 1;
    }
    struct pulc_hal *h = pulc_hal_self();
    int ret = 0;
    if (strcmp(argv[1], "info") == 0) {
        printf("node %d context %d\n", PSP_GetNodeID(), h->ctx);
    } else if (strcmp(argv[1], "hold") == 0) {
        printf("attached ctx %d pid %ld\n", h->ctx, (long)getpid());
        fflush(stdout);
        for (;;)
            pause();
    } else if (strcmp(argv[1], "lockdie") == 0) {
        rc = pulc_nic_lock(h->area, h->img);
        printf("holding the NIC lock: %d\n", rc);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    } else if (argc == 3 && strcmp(argv[1], "unknownproto") == 0) {
        uint32_t slot;
        uint8_t *b = mcp_send_slot(h->img, (unsigned)h->ctx, &slot);
        struct pulc_hdr hd = {PULC_PROTO_MAX - 1, 0, 1, 1, 0, 0, 0, 0};
        if (!b)
            return 1;
        pulc_hdr_put(b, &hd);
        mcp_send_post(h->img, (unsigned)h->ctx, slot, (uint16_t)atoi(argv[2]), PULC_HDR_LEN, 0);
        uint64_t t0 = mcp_now_ns();
        while (pulc_hal_send_busy(h) && mcp_now_ns() - t0 < TIMEOUT_NS)
            pulc_hal_poll(h);
        ret = pulc_hal_send_busy(h) ? 1 : 0;
        printf("%s\n", ret ? "not acknowledged" : "acknowledged");
    } else if (argc == 5 && (!strcmp(argv[1], "send") || !strcmp(argv[1], "recv") ||
                             !strcmp(argv[1], "waitrecv"))) {
        uint16_t node = (uint16_t)atoi(argv[2]);
        uint32_t n = (uint32_t)atoi(argv[3]), size = (uint32_t)atoi(argv[4]);
        if (size < 4 || size > (64u << 20)) {
            fprintf(stderr, "SIZE must be 4..%u\n", 64u << 20);
            ret = 2;
        } else {
            alarm(120); /* a peer that never drains must not hang the test */
            uint8_t *buf = malloc(size);
            if (!buf)
                ret = 1;
            else if (argv[1][0] == 's')
                ret = do_send(buf, node, n, size);
            else
                ret = do_recv(buf, node, n, size, !strcmp(argv[1], "waitrecv"));
            free(buf);
        }
    } else {
        fprintf(stderr, "unknown command %s\n", argv[1]);
        ret = 2;
    }
    PSP_Finalize();
    return ret;
}
