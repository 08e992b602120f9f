/*
 * pulc_attach_client — a PULC client for the psid tests (test/integration/psid-basic).
 *
 *   pulc_attach_client info                 attach, print node and context, detach
 *   pulc_attach_client hold                 attach, print "attached ctx C pid P", sleep
 *   pulc_attach_client send DST N SIZE      send N frames of SIZE bytes to node DST through
 *                                           the HAL and wait until all are acknowledged
 *   pulc_attach_client recv SRC N SIZE      receive N frames from node SRC and verify them
 *   pulc_attach_client waitrecv SRC N SIZE  the same, waiting with pulc_hal_wait_rx (spin,
 *                                           yield, sleep); prints its CPU and wall time
 *   pulc_attach_client lockdie              attach, take the NIC lock and die holding it
 * Frame i carries bytes (i * 131 + k * 7 + 1) & 0xff, its index in the first 4 bytes.
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
#include <time.h>
#include <unistd.h>

#include "hal.h"
#include "mcp_env.h"
#include "pulc.h"

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

/* b: size bytes of scratch */
static int do_send(struct pulc_hal *h, uint8_t *b, uint16_t dst, uint32_t n, uint32_t size)
{
    for (uint32_t i = 0; i < n; i++) {
        fill(b, i, size);
        int rc = pulc_hal_send_fragment(h, dst, b, size, i);
        if (rc) {
            fprintf(stderr, "send of frame %u failed: %s\n", i, strerror(-rc));
            return 1;
        }
    }
    uint64_t t0 = mcp_now_ns();
    while (pulc_hal_send_busy(h)) {
        pulc_hal_poll(h);
        if (mcp_now_ns() - t0 > TIMEOUT_NS) {
            fprintf(stderr, "%u sends not acknowledged after 30 s\n", pulc_hal_send_busy(h));
            return 1;
        }
    }
    struct mcp_send_error e;
    if (pulc_hal_send_error(h, &e)) {
        fprintf(stderr, "frame %u to node %u failed: %s\n", e.cookie, e.dst, strerror(-e.error));
        return 1;
    }
    printf("sent %u frames of %u bytes to node %u\n", n, size, dst);
    return 0;
}

/* want: size bytes of scratch */
static int do_recv(struct pulc_hal *h, uint8_t *want, uint16_t src, uint32_t n, uint32_t size)
{
    uint64_t t0 = mcp_now_ns();
    uint32_t got = 0;
    while (got < n) {
        struct mcp_rx_desc d;
        if (!pulc_hal_recv_peek(h, &d)) {
            pulc_hal_poll(h);
            if (mcp_now_ns() - t0 > TIMEOUT_NS) {
                fprintf(stderr, "received %u of %u frames in 30 s\n", got, n);
                return 1;
            }
            continue;
        }
        fill(want, got, size);
        if (d.src != src || d.len != size || memcmp(d.data, want, size) != 0) {
            uint32_t idx = 0, at = 0;
            if (d.len >= 4)
                memcpy(&idx, d.data, 4);
            while (at < d.len && at < size && ((const uint8_t *)d.data)[at] == want[at])
                at++;
            fprintf(stderr,
                    "frame %u: from node %u, %u bytes, carries index %u, first difference at "
                    "byte %u: %s\n",
                    got, d.src, d.len, idx, at,
                    d.src != src || d.len != size ? "wrong source or length" : "content differs");
            return 1;
        }
        pulc_hal_recv_done(h);
        got++;
    }
    printf("received %u frames of %u bytes from node %u: content verified\n", n, size, src);
    return 0;
}

/*
 * Like do_recv, but waiting the co-scheduling way (pulc_hal_wait_rx) instead of spinning, for
 * frames from several sends (each frame is checked against the index it carries), and
 * reporting the CPU time the wait cost: "cpu MS wall MS".
 */
static int do_waitrecv(struct pulc_hal *h, uint8_t *want, uint16_t src, uint32_t n, uint32_t size)
{
    struct timespec w0, w1;
    struct rusage r0, r1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    getrusage(RUSAGE_SELF, &r0);
    for (uint32_t got = 0; got < n; got++) {
        int rc = pulc_hal_wait_rx(h, 30000);
        if (rc <= 0) {
            fprintf(stderr, "received %u of %u frames: %s\n", got, n,
                    rc == 0 ? "nothing for 30 s" : strerror(-rc));
            return 1;
        }
        struct mcp_rx_desc d;
        pulc_hal_recv_peek(h, &d);
        uint32_t idx = 0;
        if (d.len >= 4)
            memcpy(&idx, d.data, 4);
        fill(want, idx, size);
        if (d.src != src || d.len != size || memcmp(d.data, want, size) != 0) {
            fprintf(stderr, "frame %u: from node %u, %u bytes, index %u: %s\n", got, d.src, d.len,
                    idx,
                    d.src != src || d.len != size ? "wrong source or length" : "content differs");
            return 1;
        }
        pulc_hal_recv_done(h);
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    getrusage(RUSAGE_SELF, &r1);
    double wall = (double)(w1.tv_sec - w0.tv_sec) * 1e3 + (double)(w1.tv_nsec - w0.tv_nsec) / 1e6;
    double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
                          r0.ru_stime.tv_sec) *
                     1e3 +
                 (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
                          r0.ru_stime.tv_usec) /
                     1e3;
    printf("received %u frames of %u bytes from node %u: content verified; cpu %.0f wall %.0f\n", n,
           size, src, cpu, wall);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s info | hold | send DST N SIZE | recv SRC N SIZE\n", argv[0]);
        return 2;
    }
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
        rc = pulc_nic_lock(h->area);
        printf("holding the NIC lock: %d\n", rc);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    } else if (argc == 5 && (!strcmp(argv[1], "send") || !strcmp(argv[1], "recv") ||
                             !strcmp(argv[1], "waitrecv"))) {
        uint16_t node = (uint16_t)atoi(argv[2]);
        uint32_t n = (uint32_t)atoi(argv[3]), size = (uint32_t)atoi(argv[4]);
        if (size > pulc_hal_max_payload(h) || size < 4) {
            fprintf(stderr, "SIZE must be 4..%u\n", pulc_hal_max_payload(h));
            ret = 2;
        } else {
            alarm(120); /* a peer that never drains must not hang the test */
            uint8_t *buf = malloc(size);
            if (!buf)
                ret = 1;
            else if (argv[1][0] == 's')
                ret = do_send(h, buf, node, n, size);
            else
                ret = !strcmp(argv[1], "waitrecv") ? do_waitrecv(h, buf, node, n, size)
                                                   : do_recv(h, buf, node, n, size);
            free(buf);
        }
    } else {
        fprintf(stderr, "unknown command %s\n", argv[1]);
        ret = 2;
    }
    PSP_Finalize();
    return ret;
}
