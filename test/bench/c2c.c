/*
 * c2c — the core-to-core round trip of this machine's first two CPUs: one cache line bounced
 * between two threads pinned to them.  Plain C, no psport code.
 *
 * Why the bench runs it: on a VM the host may place the two vCPUs near each other (sharing
 * a cache) or far apart, and it changes its mind while the VM runs.  Every message between
 * two processes on one node moves cache lines from one core to the other, so intra-node
 * latency and message rate follow this figure (measured here: 105-135 ns near, 470-530 ns
 * far).  test/bench/run measures it beside every intra-node MPI run, so that psport and a
 * peer measured minutes apart are compared knowing whether the host had moved the cores.
 *
 * Output: "c2c round_trip_ns=<mean> cpus=<a>,<b> trips=<n>".  Exit 1 with fewer than two
 * CPUs in the affinity mask, 2 usage error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Alignas(64) volatile uint64_t line;
static long trips = 1000000;
static int cpu_a = -1, cpu_b = -1;

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* The far end: answers every odd value with the next even one. */
static void *answer(void *arg)
{
    (void)arg;
    pin(cpu_b);
    for (uint64_t i = 1; i <= (uint64_t)trips; i++) {
        while (line != 2 * i - 1)
            ;
        line = 2 * i;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--trips") && i + 1 < argc) {
            trips = strtol(argv[++i], NULL, 10);
            if (trips < 1000) {
                fprintf(stderr, "c2c: --trips needs at least 1000\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: c2c [--trips N]   (default 1000000)\n"
                            "Core-to-core round trip of the first two CPUs this process may "
                            "run on: one cache line bounced between two pinned threads.\n");
            return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
        }
    }
    cpu_set_t mask;
    if (sched_getaffinity(0, sizeof mask, &mask)) {
        perror("c2c: sched_getaffinity");
        return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && cpu_b < 0; c++)
        if (CPU_ISSET(c, &mask)) {
            if (cpu_a < 0)
                cpu_a = c;
            else
                cpu_b = c;
        }
    if (cpu_b < 0) {
        fprintf(stderr, "c2c: needs two CPUs, this process may use one\n");
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, answer, NULL)) {
        fprintf(stderr, "c2c: cannot start a thread\n");
        return 1;
    }
    pin(cpu_a);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t i = 1; i <= (uint64_t)trips; i++) {
        line = 2 * i - 1;
        while (line != 2 * i)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    double ns =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)trips;
    printf("c2c round_trip_ns=%.1f cpus=%d,%d trips=%ld\n", ns, cpu_a, cpu_b, trips);
    return 0;
}
