/*
 * yield.c — a waiter's yield (PSP_Yield), and its way off a CPU it shares with another busy
 * task while another CPU it may use is idle.
 *
 * Two ranks of a node sometimes leave MPI_Init on the same CPU of a 2-CPU machine, and while
 * both poll and yield to each other the kernel's balancer leaves them there for tens of
 * milliseconds (it sees two cache-hot tasks): osu_mbw_mr on one node ran at 4.6 instead of
 * 90-150 MB/s in one run of eight to fifteen, sched_getcpu() the same in both ranks
 * throughout.  A yield that hands the CPU to another task shows in the thread's involuntary
 * context switches (a yield with nobody else to run does not switch, and a hypervisor's
 * preemption does not count there).  Not every yield switches even then (the kernel's EEVDF
 * scheduler runs the yielder on while the other task is not yet due), so what counts is how
 * many switched within WINDOW_NS: from a per-process number on (4 to 35, from the pid: two
 * ranks sharing a CPU see the same yields, and with one number both moved at once and shared
 * the other CPU instead), the thread moves itself to the next CPU of its affinity mask and
 * keeps the mask (no pinning), if a coin says so (two threads reaching their numbers together
 * moved together), and at most every MOVE_GAP_MIN, doubling while the windows stay busy (on an
 * oversubscribed node every CPU is busy and moving helps nobody).  A CPU counts as shared
 * after a yield that switched until SHARED_HOLD yields in a row did not (PSP_YieldShared).
 * PSP_YIELD_MOVE=0 leaves it all to the kernel.
 */
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pulc.h"
#include "settings.h"

#define WINDOW_NS    10000000ull   /* switching yields are counted in windows this long */
#define MOVE_GAP_MIN 20000000ull   /* a thread moves at most this often ... */
#define MOVE_GAP_MAX 5000000000ull /* ... doubling while its windows stay busy, to this */
#define SHARED_HOLD  8 /* after a switching yield the CPU counts as shared for this many more */

/* Set once, at the first yield of any thread (atomics: several may get there at once). */
static int move_setting = -1;     /* PSP_YIELD_MOVE */
static unsigned switches_to_move; /* this process's number of switching yields in a window */
/* Initial-exec: PSP_YieldShared runs at every pass of a waiter's loop, and the general model
 * made each read a call (__tls_get_addr, 2 % of osu_mbw_mr's sender).  libpulc is linked, not
 * loaded later, so its few bytes come from the static TLS block. */
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS uint64_t window_start, last_move_ns, move_gap, coin;
static TLS unsigned window_switches, shared_left;
static unsigned moves; /* of every thread, for PSP_YieldMoves() */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long involuntary_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) ? -1 : ru.ru_nivcsw;
}

/* Move the calling thread to the CPU after its current one in its mask, keeping the mask. */
static void move_on(void)
{
    cpu_set_t mask, one;
    if (sched_getaffinity(0, sizeof mask, &mask) || CPU_COUNT(&mask) < 2)
        return; /* bound to one CPU: the binding is the user's choice */
    int cur = sched_getcpu(), to = -1;
    for (int i = 1; i <= CPU_SETSIZE && to < 0; i++) {
        int c = (cur + i) % CPU_SETSIZE;
        if (c != cur && CPU_ISSET(c, &mask))
            to = c;
    }
    if (to < 0)
        return;
    CPU_ZERO(&one);
    CPU_SET(to, &one);
    if (sched_setaffinity(0, sizeof one, &one))
        return;
    (void)sched_setaffinity(0, sizeof mask, &mask); /* on CPU `to` now; free to move again */
    __atomic_add_fetch(&moves, 1, __ATOMIC_RELAXED);
    PSP_DEBUG_LOG("yield: CPU %d ran another task at %u yields within %llu ms: moved to CPU %d",
                  cur, __atomic_load_n(&switches_to_move, __ATOMIC_RELAXED), WINDOW_NS / 1000000ull,
                  to);
}

int PSP_Yield(void)
{
    int setting = __atomic_load_n(&move_setting, __ATOMIC_ACQUIRE);
    if (setting < 0) {
        char err[256];
        uint64_t v;
        setting = 1;
        if (psp_setting_u64("PSP_YIELD_MOVE", 0, 1, &v, err, sizeof err))
            PSP_ERROR("%s; using PSP_YIELD_MOVE=1", err);
        else
            setting = (int)v;
        uint64_t z = (uint64_t)getpid() * 0x9e3779b97f4a7c15u;
        __atomic_store_n(&switches_to_move, 4 + (unsigned)((z ^ (z >> 29)) % 32u),
                         __ATOMIC_RELAXED);
        __atomic_store_n(&move_setting, setting, __ATOMIC_RELEASE);
    }
    if (!setting) {
        sched_yield();
        return 0;
    }
    long before = involuntary_switches();
    sched_yield();
    long after = involuntary_switches();
    if (before < 0 || after <= before) {
        if (shared_left)
            shared_left--;
        return shared_left != 0;
    }
    shared_left = SHARED_HOLD;
    uint64_t now = now_ns();
    if (now - window_start > WINDOW_NS) {
        if (window_switches < __atomic_load_n(&switches_to_move, __ATOMIC_RELAXED))
            move_gap = MOVE_GAP_MIN; /* the last window was calm */
        window_start = now;
        window_switches = 0;
    }
    unsigned to_move = __atomic_load_n(&switches_to_move, __ATOMIC_RELAXED);
    if (++window_switches < to_move)
        return 1;
    window_switches = 0;
    window_start = now;
    if (last_move_ns && now - last_move_ns < move_gap)
        return 1;
    /* A coin, too: two threads that reach their numbers together would move together
     * (splitmix64 of the pid and the clock; a seed from the pid and a TLS address gave two
     * ranks the same first coin, their addresses sharing the low bits). */
    coin += 0x9e3779b97f4a7c15u ^ (coin ? 0 : ((uint64_t)getpid() << 32 ^ now));
    uint64_t z = coin;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    if ((z ^ (z >> 31)) >> 63)
        return 1;
    last_move_ns = now;
    /* Busy windows after a move (every CPU busy: an oversubscribed node) move less and less. */
    move_gap =
        move_gap ? (move_gap * 2 < MOVE_GAP_MAX ? move_gap * 2 : MOVE_GAP_MAX) : MOVE_GAP_MIN;
    move_on();
    return 1;
}

int PSP_YieldShared(void)
{
    return shared_left != 0;
}

unsigned PSP_YieldMoves(void)
{
    return __atomic_load_n(&moves, __ATOMIC_RELAXED);
}
