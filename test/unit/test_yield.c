/* test_yield.c — PSP_Yield (pulc/src/yield.c): a waiter that keeps yielding its CPU to another
 * busy task moves itself to another CPU of its mask, keeps the mask, and knows the CPU was
 * shared; alone on its CPU it stays put.  Needs no psid. */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "pulc.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Put the caller on CPU cpu, then give it back its whole mask (where a rank can start). */
static void start_on(int cpu, const cpu_set_t *mask)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0, "setaffinity");
    REQUIRE(sched_setaffinity(0, sizeof *mask, mask) == 0, "setaffinity");
}

/* Two processes polling and yielding, as two ranks waiting for each other. */
struct poller_result {
    unsigned moves;
    int cpu_end;
    int shared_seen;
    int mask_kept;
};

static struct poller_result poll_for(double ms, const cpu_set_t *mask)
{
    struct poller_result r = {0, -1, 0, 0};
    double end = now_ms() + ms;
    while (now_ms() < end) {
        PSP_Yield();
        r.shared_seen |= PSP_YieldShared();
    }
    r.moves = PSP_YieldMoves();
    r.cpu_end = sched_getcpu();
    cpu_set_t now;
    r.mask_kept = sched_getaffinity(0, sizeof now, &now) == 0 && CPU_EQUAL(&now, mask);
    return r;
}

TEST(two_waiters_started_on_one_cpu_end_on_two)
{
    cpu_set_t mask;
    REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0, "getaffinity");
    if (CPU_COUNT(&mask) < 2)
        SKIP("one CPU: nowhere to move");
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &mask))
            first = c;
    unsetenv("PSP_YIELD_MOVE");
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    start_on(first, &mask);
    struct poller_result r = poll_for(300, &mask);
    if (pid == 0) {
        _exit(write(fds[1], &r, sizeof r) == sizeof r ? 0 : 1);
    }
    struct poller_result c;
    REQUIRE(read(fds[0], &c, sizeof c) == sizeof c, "child's result");
    int st = 0;
    waitpid(pid, &st, 0);
    printf("# parent: %u moves, on CPU %d; child: %u moves, on CPU %d\n", r.moves, r.cpu_end,
           c.moves, c.cpu_end);
    CHECK(r.shared_seen && c.shared_seen, "both saw their CPU shared (parent %d, child %d)",
          r.shared_seen, c.shared_seen);
    CHECK(r.moves + c.moves >= 1, "nobody moved");
    CHECK(r.cpu_end != c.cpu_end, "both ended on CPU %d", r.cpu_end);
    CHECK(r.mask_kept && c.mask_kept, "a mask was left changed (parent %d, child %d)", r.mask_kept,
          c.mask_kept);
}

TEST(a_waiter_alone_on_its_cpu_stays)
{
    cpu_set_t mask;
    REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0, "getaffinity");
    int cpu = sched_getcpu();
    struct poller_result r = poll_for(100, &mask);
    /* (a kernel thread may take the CPU at a yield now and then: that is no reason to move) */
    CHECK_EQ_I64(r.moves, 0);
    CHECK_EQ_I64(r.cpu_end, cpu);
}

TEST(with_psp_yield_move_0_nobody_moves)
{
    cpu_set_t mask;
    REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0, "getaffinity");
    if (CPU_COUNT(&mask) < 2)
        SKIP("one CPU: nowhere to move");
    setenv("PSP_YIELD_MOVE", "0", 1);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork");
    start_on(sched_getcpu(), &mask);
    struct poller_result r = poll_for(100, &mask);
    if (pid == 0)
        _exit(r.moves == 0 ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_EQ_I64(r.moves, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child moved");
}
TEST(a_bad_psp_yield_move_is_reported_and_the_default_used)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0, "pipe");
    setenv("PSP_YIELD_MOVE", "sometimes", 1);
    fflush(stderr);
    int saved = dup(2);
    REQUIRE(saved >= 0 && dup2(fds[1], 2) == 2, "dup2");
    PSP_Yield();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char buf[512] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    CHECK(n > 0 && strstr(buf, "PSP_YIELD_MOVE=sometimes") && strstr(buf, "using PSP_YIELD_MOVE=1"),
          "no message about the bad value: '%s'", n > 0 ? buf : "");
}

TEST_MAIN()
