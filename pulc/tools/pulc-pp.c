/*
 * pulc-pp — PULC-level benchmark and verification tool: latency, streaming throughput and N½
 * of the HAL and of port-D, between two nodes (inter-node) and on one node (intra-node),
 * summed up side by side like table 3 of the ParaStation2 paper (seed 000, §5.1).
 *
 * One invocation does the whole run.  Before it attaches, the process that runs it (the
 * "client") forks one peer process per mode: the inter-node peer attaches to another node's
 * psid (--peer-socket), the intra-node peer to the client's own psid (PSP_PSID_SOCKET).  A
 * process belongs to the node whose psid it attached to, whatever network namespace it runs in
 * (the link socket comes from psid), so both peers can be children on one host.  Client and
 * peer coordinate over a socketpair (commands, "ready", results); only the data path is timed
 * and nothing but the measured traffic crosses it.
 *
 * Levels (struct level; a `raw` level for the rawdata API plugs in beside them):
 *   hal    fragments through the HAL: a message is cut into frames of at most one NIC payload,
 *          each written into a send slot with a 20-byte PULC header (see "HAL frames" below)
 *          and received by this process's own handler in the protocol switch, which copies it
 *          into the destination buffer: one copy on each side, no message area.
 *   portd  PSP_ISend / PSP_IReceive on port-D ports (remote: fragments through the NIC and
 *          the message area; local: through the area, or copied once with process_vm_readv).
 *
 * Measurements per level and mode:
 *   latency     ping-pong of 4 and 8 bytes: round trip / 2, median, mean and min..max of --reps
 *               rounds after a warm-up (count and time), measured before the streams in
 *               --blocks blocks per level that alternate between the levels; port-D's latency
 *               over the HAL's is the median of the blocks' differences (struct over_hal)
 *   throughput  a stream of messages of each size (4 B .. 4 MiB) client -> peer, timed from the
 *               first send until the peer's 4-byte "done" message (carrying the count) arrives;
 *               a run shorter than --min-run-ms is a warm-up and made again longer; the
 *               fastest of --stream-reps runs counts (the host is shared and its load varies);
 *               the timed passes check length, order and sender of every message, not content
 *   N½          the message size at which the stream reaches half the peak throughput
 *               (interpolated between measured sizes on a log scale)
 *   verified    a separate, untimed pass streams every size again with content derived from
 *               (run, message number, size) and the peer checks every byte; the ping-pong
 *               compares every echo with what was sent (--no-verify skips the verified pass)
 * and, around the intra-node runs, the bandwidth of a single-core memcpy of 4 MiB.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hal.h"
#include "log.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "proto.h"
#include "psk_dev.h"
#include "pulc.h"
#include "settings.h"
#include "tool.h"

#define PROG "pulc-pp"

#define EXIT_OK    0
#define EXIT_FAIL  PSP_EXIT_FAIL  /* a measurement or check failed, psid unreachable, a peer died */
#define EXIT_USAGE PSP_EXIT_USAGE /* bad command line or settings */

#define MAX_SIZES     32
#define MIB           (1024u * 1024u)
#define MIN_SIZE      4u /* the done message carries a 4-byte count */
#define MAX_SIZE      (64u * MIB)
#define BIG_SIZE      (4u * MIB) /* throughput and memcpy figures of the summary */
#define WINDOW        16u        /* port-D: sends in flight, receives posted */
#define BUF_BUDGET    (16u * MIB)
#define WARM_NS       200000000ull /* ping-pong: warm up at least this long (the first ms are slow) */
#define WARM_BLOCK_NS 20000000ull /* ... and a latency block after the first of its level */
#define MAX_BLOCKS    100u

/*
 * HAL frames.  The node's host receive queue is shared by every PULC process of the node and
 * must be consumed through pulc_drain(): it keeps the area's exactly-once bookkeeping
 * (rx_count follows the image's hostq_tail) under the area lock; the HAL only peeks.  So HAL frames
 * carry a valid 20-byte PULC header with a protocol id of their own, PP_PROTO_HAL, for which this
 * process registers a handler (pulc_proto_register) and drains with pulc_drain() exactly as
 * libpulc's progress does.  A port-D header instead would be queued into a port by whoever drains
 * (or refused with an error notice), which would make the HAL level a port-D measurement.  psid's
 * NIC thread leaves a frame of a protocol it has no handler for at the head of the host queue for
 * up to 1 s (PULC_UNKNOWN_NS) for its owner; another client process that drains one would count it
 * in rx_malformed and drop it.  Hence the HAL level polls and never sleeps; every frame carries
 * (run, message, offset, size), so a lost frame shows as a gap or a stall, and a run that lost one
 * is measured again (--retries); a ping-pong sends a ping again when its echo is overdue.  The id
 * is the last of the switch, far from those proto.h hands out from 1 upwards.
 */
#define PP_PROTO_HAL (PULC_PROTO_MAX - 1)
_Static_assert(PP_PROTO_HAL > PULC_PROTO_ERR, "PP_PROTO_HAL collides with a PULC protocol");
#define PP_COOKIE       0xb0b0ffffu   /* send cookie of HAL frames (port.c ignores it) */
#define HAL_STALL_NS    2000000000ull /* nothing of the run arrived for this long: a frame is lost */
#define HAL_RESEND_NS   20000000ull   /* ping-pong: no echo for this long: send the ping again */
#define HAL_MAX_RESENDS 100u
#define LOSS_HINT       " (another process of the node drained it, or this one stalled for 1 s)"

enum pp_mode { MODE_INTER, MODE_INTRA, NMODES };
static const char *const mode_name[NMODES] = {"inter-node", "intra-node"};
static const char *const mode_short[NMODES] = {"inter", "intra"};

/* Levels, lowest first.  LVL_RAW (the rawdata API, pulc.h section "rawdata") goes here. */
enum pp_level { LVL_HAL, LVL_PORTD, NLEVELS };

/* ---------------------------------------------------------------------------------------- */
/* Options and error messages                                                               */
/* ---------------------------------------------------------------------------------------- */

struct opts {
    const char *peer_socket; /* or, with peer_device, the peer node's kernel module device */
    bool peer_device;
    bool mode[NMODES], mode_given;
    bool level[NLEVELS];
    uint32_t sizes[MAX_SIZES];
    unsigned nsizes;
    bool sizes_given, reps_given, warmup_given, volume_given, min_given, max_given, sreps_given;
    bool minrun_given, blocks_given;
    uint64_t blocks; /* latency: blocks per level and size, alternating between the levels */
    uint64_t reps, warmup, volume, min_msgs, max_msgs, vvolume, timeout_s, retries, stream_reps;
    uint64_t min_run_ms;
    bool verify, quick, small_pages;
    const char *csv;
};
static struct opts o;

/* Usage text on f. */
static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: " PROG " [options]\n"
        "\n"
        "Benchmark and verify libpulc like table 3 of the ParaStation2 paper: latency (4-byte\n"
        "round trip / 2), streaming throughput for messages of 4 B .. 4 MiB and N½ (the size\n"
        "reaching half the peak throughput), of the HAL and of port-D, between two nodes and on\n"
        "one node, in one run.  This process attaches to its node's psid (PSP_PSID_SOCKET) and\n"
        "forks its peers: the inter-node peer attaches to another node's psid (--peer-socket),\n"
        "the intra-node peer to the same psid.  With test/cluster/psport-cluster:\n"
        "  psport-cluster up 2 --psid\n"
        "  psport-cluster exec 0 " PROG " --peer-socket /run/psport-cluster/psp-n/node1/psid.sock\n"
        "\n"
        "Options:\n"
        "  -P, --peer-socket PATH  psid socket of another node: run the inter-node measurements\n"
        "                          with a peer attached there\n"
        "  -D, --peer-device PATH  the same through another node's psport kernel module device\n"
        "                          (this process attaches to PSP_DEVICE, e.g. /dev/psport)\n"
        "  -S, --socket PATH       this node's psid socket (default: $PSP_PSID_SOCKET)\n"
        "  -m, --mode LIST         inter, intra or all (default: all; without --peer-socket\n"
        "                          only intra runs)\n"
        "  -l, --level LIST        hal, portd or all (default: all)\n"
        "      --sizes LIST        streamed message sizes, 4 .. 64m bytes, k/m suffixes (default:\n"
        "                          powers of 2 from 4 to 4m; --quick: 4,64,1k,16k,256k,4m)\n"
        "      --reps N            ping-pong round trips per latency (default: 1000; --quick: "
        "200)\n"
        "      --warmup N          ping-pong warm-up round trips (default: reps/10, at most 100)\n"
        "      --blocks N          measure each latency in N blocks of reps/N round trips,\n"
        "                          alternating between the levels (default: 10; --quick: 4;\n"
        "                          at most 100): port-D's latency over the HAL's is the median\n"
        "                          of the blocks' differences\n"
        "      --volume N          bytes streamed per size (default: 32m; --quick: 8m) ...\n"
        "      --min-msgs N        ... but at least N messages (default: 8; --quick: 2)\n"
        "      --max-msgs N        ... and at most N messages (default: 20000; --quick: 2000)\n"
        "      --stream-reps N     stream each size N times, the fastest counts (default: 3;\n"
        "                          --quick: 1)\n"
        "      --min-run-ms MS     a stream shorter than MS is a warm-up: it is made again with\n"
        "                          more messages (default: 100; --quick: 0)\n"
        "      --no-verify         skip the verified pass (each size streamed again, every byte\n"
        "                          checked by the receiver)\n"
        "      --quick             a short run (for tests): the --quick defaults above\n"
        "      --small-pages       buffers (and the memcpy reference's) in 4 KiB pages; by\n"
        "                          default both ask for transparent huge pages (MADV_HUGEPAGE)\n"
        "      --csv FILE          also write every figure to FILE (comma separated)\n"
        "      --retries N         measure a HAL run again after a lost frame, N times at most\n"
        "                          (default: 3)\n"
        "      --timeout SEC       give up on a measurement after SEC seconds (default: 120)\n"
        "  -h, --help              show this help\n"
        "\n"
        "Levels: hal = fragments through the HAL (send slots, firmware, host queue; one copy on\n"
        "each side); portd = PSP_ISend/PSP_IReceive.  HAL within one node is n/a: the firmware\n"
        "refuses a send to its own node.  HAL frames have a protocol id only " PROG " handles:\n"
        "psid leaves them for " PROG " for up to 1 s; a run that lost one anyway (another\n"
        "process of the node drained it) is measured again, --retries.\n"
        "Timed passes check length, order and sender of every message; the verified pass\n"
        "checks content.  Targets (printed, informational): inter-node port-D 8-byte latency\n"
        "<= HAL's + 1 µs (the median of the paired blocks' differences) and throughput >= 0.9x\n"
        "HAL; intra-node port-D 8-byte latency <= 1 µs and\n"
        "4 MiB throughput >= 0.8x a single-core memcpy over the same buffers as the stream.\n"
        "Exit status: 0 every measurement ran and every check passed (targets do not count),\n"
        "1 a measurement or check failed or psid is not reachable, 2 usage error (or the\n"
        "--csv file cannot be created).\n");
}

/* --mode LIST into o.mode. */
static void parse_modes(const char *text)
{
    char *copy = strdup(text), *save = NULL;
    if (!copy)
        psp_fail_exit("out of memory");
    memset(o.mode, 0, sizeof o.mode);
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "inter"))
            o.mode[MODE_INTER] = true;
        else if (!strcmp(t, "intra"))
            o.mode[MODE_INTRA] = true;
        else if (!strcmp(t, "all"))
            o.mode[MODE_INTER] = o.mode[MODE_INTRA] = true;
        else
            psp_usage_error("--mode: unknown mode '%s' (inter, intra, all)", t);
    }
    free(copy);
    if (!o.mode[MODE_INTER] && !o.mode[MODE_INTRA])
        psp_usage_error("--mode: no mode named in '%s'", text);
    o.mode_given = true;
}

/* --level LIST into o.level. */
static void parse_levels(const char *text)
{
    char *copy = strdup(text), *save = NULL;
    if (!copy)
        psp_fail_exit("out of memory");
    memset(o.level, 0, sizeof o.level);
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "hal"))
            o.level[LVL_HAL] = true;
        else if (!strcmp(t, "portd"))
            o.level[LVL_PORTD] = true;
        else if (!strcmp(t, "all"))
            o.level[LVL_HAL] = o.level[LVL_PORTD] = true;
        else if (!strcmp(t, "raw"))
            psp_usage_error("--level raw: the rawdata level is not there yet (it waits for the "
                            "rawdata API of pulc.h)");
        else
            psp_usage_error("--level: unknown level '%s' (hal, portd, all)", t);
    }
    free(copy);
    if (!o.level[LVL_HAL] && !o.level[LVL_PORTD])
        psp_usage_error("--level: no level named in '%s'", text);
}

/* Ascending order for qsort of sizes. */
static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* --sizes LIST into o.sizes, sorted, duplicates removed. */
static void parse_sizes(const char *text)
{
    char *copy = strdup(text), *save = NULL;
    if (!copy)
        psp_fail_exit("out of memory");
    o.nsizes = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o.nsizes == MAX_SIZES)
            psp_usage_error("--sizes: at most %d sizes", MAX_SIZES);
        o.sizes[o.nsizes++] = (uint32_t)psp_opt_u64("sizes", t, MIN_SIZE, MAX_SIZE);
    }
    free(copy);
    if (!o.nsizes)
        psp_usage_error("--sizes: no size in '%s'", text);
    qsort(o.sizes, o.nsizes, sizeof o.sizes[0], cmp_u32);
    unsigned n = 1;
    for (unsigned i = 1; i < o.nsizes; i++)
        if (o.sizes[i] != o.sizes[n - 1])
            o.sizes[n++] = o.sizes[i];
    o.nsizes = n;
    o.sizes_given = true;
}

/* The command line into o (defaults first, --quick ones where not given). */
static void parse_options(int argc, char **argv)
{
    enum {
        O_SIZES = 256,
        O_REPS,
        O_WARMUP,
        O_VOLUME,
        O_MINMSGS,
        O_MAXMSGS,
        O_NOVERIFY,
        O_QUICK,
        O_SMALLPAGES,
        O_CSV,
        O_RETRIES,
        O_TIMEOUT,
        O_SREPS,
        O_MINRUN,
        O_BLOCKS,
    };
    static const struct option lo[] = {
        {"peer-socket", required_argument, NULL, 'P'},
        {"peer-device", required_argument, NULL, 'D'},
        {"socket", required_argument, NULL, 'S'},
        {"mode", required_argument, NULL, 'm'},
        {"level", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {"sizes", required_argument, NULL, O_SIZES},
        {"reps", required_argument, NULL, O_REPS},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"volume", required_argument, NULL, O_VOLUME},
        {"min-msgs", required_argument, NULL, O_MINMSGS},
        {"max-msgs", required_argument, NULL, O_MAXMSGS},
        {"no-verify", no_argument, NULL, O_NOVERIFY},
        {"quick", no_argument, NULL, O_QUICK},
        {"small-pages", no_argument, NULL, O_SMALLPAGES},
        {"csv", required_argument, NULL, O_CSV},
        {"retries", required_argument, NULL, O_RETRIES},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"stream-reps", required_argument, NULL, O_SREPS},
        {"min-run-ms", required_argument, NULL, O_MINRUN},
        {"blocks", required_argument, NULL, O_BLOCKS},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(&o, 0, sizeof o);
    o.mode[MODE_INTER] = o.mode[MODE_INTRA] = true;
    o.level[LVL_HAL] = o.level[LVL_PORTD] = true;
    o.verify = true;
    o.retries = 3;
    o.timeout_s = 120;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":P:D:S:m:l:h", lo, NULL)) != -1) {
        switch (c) {
        case 'P':
        case 'D':
            if (!*optarg)
                psp_usage_error("%s: empty path", c == 'P' ? "--peer-socket" : "--peer-device");
            o.peer_socket = optarg;
            o.peer_device = c == 'D';
            break;
        case 'S':
            if (!*optarg)
                psp_usage_error("--socket: empty path");
            setenv("PSP_PSID_SOCKET", optarg, 1);
            break;
        case 'm':
            parse_modes(optarg);
            break;
        case 'l':
            parse_levels(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        case O_SIZES:
            parse_sizes(optarg);
            break;
        case O_REPS:
            o.reps = psp_opt_u64("reps", optarg, 1, 10000000);
            o.reps_given = true;
            break;
        case O_WARMUP:
            o.warmup = psp_opt_u64("warmup", optarg, 0, 10000000);
            o.warmup_given = true;
            break;
        case O_VOLUME:
            o.volume = psp_opt_u64("volume", optarg, 1, 1ull << 40);
            o.volume_given = true;
            break;
        case O_MINMSGS:
            o.min_msgs = psp_opt_u64("min-msgs", optarg, 1, 100000000);
            o.min_given = true;
            break;
        case O_MAXMSGS:
            o.max_msgs = psp_opt_u64("max-msgs", optarg, 1, 100000000);
            o.max_given = true;
            break;
        case O_NOVERIFY:
            o.verify = false;
            break;
        case O_QUICK:
            o.quick = true;
            break;
        case O_SMALLPAGES:
            o.small_pages = true;
            break;
        case O_CSV:
            if (!*optarg)
                psp_usage_error("--csv: empty file name");
            o.csv = optarg;
            break;
        case O_RETRIES:
            o.retries = psp_opt_u64("retries", optarg, 0, 100);
            break;
        case O_TIMEOUT:
            o.timeout_s = psp_opt_u64("timeout", optarg, 1, 86400);
            break;
        case O_MINRUN:
            o.min_run_ms = psp_opt_u64("min-run-ms", optarg, 0, 600000);
            o.minrun_given = true;
            break;
        case O_BLOCKS:
            o.blocks = psp_opt_u64("blocks", optarg, 1, MAX_BLOCKS);
            o.blocks_given = true;
            break;
        case O_SREPS:
            o.stream_reps = psp_opt_u64("stream-reps", optarg, 1, 1000);
            o.sreps_given = true;
            break;
        case ':':
            psp_usage_error("option '%s' needs a value", argv[optind - 1]);
        case '?':
        default:
            if (optopt)
                psp_usage_error("unknown option '-%c'", optopt);
            psp_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        psp_usage_error("unexpected argument '%s'", argv[optind]);
    if (o.mode_given && o.mode[MODE_INTER] && !o.peer_socket)
        psp_usage_error("--mode inter needs --peer-socket PATH (another node's psid socket) or "
                        "--peer-device PATH");
    if (!o.mode_given && !o.peer_socket)
        o.mode[MODE_INTER] = false; /* reported as "not run" */
    if (!o.sizes_given) {
        static const uint32_t quick[] = {4, 64, 1024, 16384, 262144, BIG_SIZE};
        o.nsizes = 0;
        if (o.quick)
            for (unsigned i = 0; i < sizeof quick / sizeof quick[0]; i++)
                o.sizes[o.nsizes++] = quick[i];
        else
            for (uint32_t s = MIN_SIZE; s <= BIG_SIZE; s *= 2)
                o.sizes[o.nsizes++] = s;
    }
    if (!o.reps_given)
        o.reps = o.quick ? 200 : 1000;
    if (!o.blocks_given)
        o.blocks = o.quick ? 4 : 10;
    if (o.blocks > o.reps) /* at least one round trip a block */
        o.blocks = o.reps;
    if (!o.warmup_given)
        o.warmup = o.reps / 10 < 100 ? o.reps / 10 : 100;
    if (!o.volume_given)
        o.volume = o.quick ? 8ull * MIB : 32ull * MIB;
    if (!o.min_given)
        o.min_msgs = o.quick ? 2 : 8;
    if (!o.max_given)
        o.max_msgs = o.quick ? 2000 : 20000;
    if (!o.sreps_given)
        o.stream_reps = o.quick ? 1 : 3;
    if (!o.minrun_given)
        o.min_run_ms = o.quick ? 0 : 100;
    if (o.min_msgs > o.max_msgs)
        psp_usage_error("--min-msgs %" PRIu64 " is larger than --max-msgs %" PRIu64, o.min_msgs,
                        o.max_msgs);
    o.vvolume = o.quick ? 2ull * MIB : 8ull * MIB;
}

/* ---------------------------------------------------------------------------------------- */
/* Content, buffers, small helpers                                                          */
/* ---------------------------------------------------------------------------------------- */

/* Store v little-endian at p. */
static void put32(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, 4);
}

/* The little-endian value at p. */
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return le32toh(v);
}

/* A 64-bit mixer (splitmix64's finaliser). */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The seed of message msgno of run run with len bytes. */
static inline uint64_t content_seed(uint32_t run, uint64_t msgno, uint32_t len)
{
    return mix64(((uint64_t)run << 40) ^ mix64(msgno + 0x5851f42d4c957f2dull) ^ len);
}

/* Word i of a message's content: distinct for every i, cheap to compute. */
static inline uint64_t content_word(uint64_t seed, uint64_t i)
{
    uint64_t v = seed + i * 0x9e3779b97f4a7c15ull;
    return htole64(v ^ (v >> 29));
}

/* Fill p with the content of message msgno of run run (len bytes). */
static void content_fill(uint8_t *p, uint32_t len, uint32_t run, uint64_t msgno)
{
    uint64_t seed = content_seed(run, msgno, len);
    uint32_t words = len / 8;
    for (uint32_t i = 0; i < words; i++) {
        uint64_t w = content_word(seed, i);
        memcpy(p + 8 * (size_t)i, &w, 8);
    }
    if (len % 8) {
        uint64_t w = content_word(seed, words);
        memcpy(p + 8 * (size_t)words, &w, len % 8);
    }
}

/* Bytes of p (len) that differ from content_fill()'s; *first gets the first such offset. */
static uint64_t content_check(const uint8_t *p, uint32_t len, uint32_t run, uint64_t msgno,
                              uint32_t *first)
{
    uint64_t seed = content_seed(run, msgno, len), bad = 0;
    uint32_t words = (len + 7) / 8;
    for (uint32_t i = 0; i < words; i++) {
        uint64_t want = content_word(seed, i), got = 0;
        uint32_t n = len - 8 * i < 8 ? len - 8 * i : 8;
        memcpy(&got, p + 8 * (size_t)i, n);
        if (n < 8)
            want &= htole64((1ull << (8 * n)) - 1);
        if (got == want)
            continue;
        const uint8_t *g = (const uint8_t *)&got, *w = (const uint8_t *)&want;
        for (uint32_t k = 0; k < n; k++)
            if (g[k] != w[k]) {
                if (!bad)
                    *first = 8 * i + k;
                bad++;
            }
    }
    return bad;
}

/*
 * n bytes for messages or the memcpy reference, 2 MiB aligned, in transparent huge pages
 * unless --small-pages: the kernel's single copy between processes (process_vm_readv) pins
 * every page it touches, 512 times fewer with huge pages (4 MiB: 19-24 GB/s in 4 KiB pages,
 * 41 GB/s in huge pages here), and memcpy is measured over the same kind of memory.  Released
 * with bench_free(p, n).
 */
static void *bench_alloc(size_t n)
{
    size_t len = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    uint8_t *m =
        mmap(NULL, len + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)m + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
    if (p > m) /* trim to the aligned part */
        munmap(m, (size_t)(p - m));
    munmap(p + len, (size_t)(m + len + (2u << 20) - (p + len)));
    if (!o.small_pages)
        madvise(p, len, MADV_HUGEPAGE); /* a hint: without THP it is 4 KiB pages */
    return p;
}

/* Releases what bench_alloc(n) returned. */
static void bench_free(void *p, size_t n)
{
    if (p)
        munmap(p, (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1));
}

/* A grow-only buffer, touched once so page faults stay out of timed runs. */
struct pool {
    uint8_t *p;
    size_t size;
};
static struct pool send_pool, recv_pool;

/* At least n bytes of pool pl. */
static uint8_t *pool_get(struct pool *pl, size_t n)
{
    if (n > pl->size) {
        bench_free(pl->p, pl->size);
        pl->p = bench_alloc(n);
        if (!pl->p)
            psp_fail_exit("out of memory (%zu bytes of buffers)", n);
        memset(pl->p, 0xa5, n);
        pl->size = n;
    }
    return pl->p;
}

/* Buffers (sender) or posted receives (receiver) for size-byte messages: within the budget. */
static uint32_t slots_for(uint32_t size, uint32_t least)
{
    uint32_t n = BUF_BUDGET / size;
    if (n > WINDOW)
        n = WINDOW;
    return n < least ? least : n;
}

/* mcp_now_ns() difference in seconds. */
static double secs_between(uint64_t t0, uint64_t t1)
{
    return (double)(t1 - t0) / 1e9;
}

/* Ascending order for qsort of doubles. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* "exited with status 3" / "was killed by signal 9 (Killed)" for a wait status. */
static void describe_status(int st, char *buf, size_t n)
{
    if (WIFEXITED(st))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, n, "stopped (status 0x%x)", st);
}

/* ---------------------------------------------------------------------------------------- */
/* This process's attachment                                                                */
/* ---------------------------------------------------------------------------------------- */

/* What this process (client or peer) attached: its HAL, the drain's view, its port-D port. */
static struct {
    struct pulc_hal *h;
    struct pulc_node node;
    PSP_Port *port;
    uint16_t self;
} me;

/*
 * A measurement's endpoint: whom we talk to and how the run stands.  The level functions take
 * it; they return 0 or a negative errno with the text in err: -ETIME the deadline passed,
 * -ECANCELED stop() said so (the other side failed or aborted), -EILSEQ a HAL frame was lost
 * (the run can be measured again), others: the layer under test failed.
 */
struct ep {
    uint16_t peer_node;
    PSP_PortId peer_port;
    uint32_t run;      /* run id: HAL frames carry its low 16 bits */
    uint64_t deadline; /* mcp_now_ns() */
    const char *phase; /* what the run is doing, for the timeout message */
    int (*stop)(struct ep *e);
    void (*ready)(struct ep *e); /* peer: set up, tell the client */
    void *ctl;                   /* the client's struct peer */
    int peer_rc;                 /* client: the peer's failure that stopped us */
    uint64_t resends;            /* HAL ping-pong: pings sent again */
    uint64_t warm_rounds;        /* ping-pong: rounds not counted first ... */
    uint64_t warm_ns;            /* ... and for at least this long */
    uint64_t last_check;
    uint64_t msgs, bytes, bad_msgs, bad_bytes; /* receiving side of a stream */
    char first_bad[200];
    char err[400];
};

/* Record the error text of e and return rc. */
static int ep_fail(struct ep *e, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int ep_fail(struct ep *e, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    return rc;
}

/* The state of one wait loop: turns, and when it began (taken at its 64th turn). */
struct waiter {
    unsigned turn;
    uint64_t start;
};

/*
 * One idle turn of a wait loop: every 64th turn the deadline and (every 0.5 ms) the stop
 * check.  Waits spin and never yield or sleep: on a busy host a yield can leave the core to
 * another task for a whole time slice, which is what a latency figure should not show.
 * 0 or an error for ep_fail.
 */
static int ep_wait_turn(struct ep *e, struct waiter *w)
{
    if ((++w->turn & 63) == 0) {
        uint64_t now = mcp_now_ns();
        if (!w->start)
            w->start = now;
        if (now > e->deadline)
            return ep_fail(e, -ETIME,
                           "the measurement did not finish within --timeout %" PRIu64
                           " s (while %s)",
                           o.timeout_s, e->phase);
        if (now - e->last_check >= 500000) {
            e->last_check = now;
            if (e->stop && e->stop(e))
                return -ECANCELED;
        }
    }
    return 0;
}

/* Text for a failed NIC send (mcp_send_error.error). */
static const char *nic_error_text(int err)
{
    switch (err) {
    case -ETIMEDOUT:
        return "the node stopped answering (PSP_PEER_TIMEOUT_MS)";
    case -ECONNRESET:
        return "the node restarted (its connection was reset)";
    case -EINVAL:
        return "the firmware refused the send (invalid destination or length)";
    default:
        return strerror(err < 0 ? -err : EIO);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Level hal: fragments through the HAL                                                     */
/* ---------------------------------------------------------------------------------------- */

/* The receiving state of this process's HAL handler (one run at a time). */
static struct {
    bool active;
    uint16_t peer, run;
    uint32_t size; /* every message of the run has this size */
    uint8_t *buf;  /* messages land here */
    bool verify;   /* check content when a message is complete */
    uint32_t next_msg, got;
    uint64_t msgs, frames;
    uint64_t bad_msgs, bad_bytes;
    char first_bad[200];
    bool gap;
    char gap_text[360];
    bool pingpong; /* a resent single-frame message is a duplicate, not a gap */
    bool echoer;   /* ... and the echoing side sends its echo again */
    bool reecho;   /* a duplicate came in: echo message reecho_id again */
    uint32_t reecho_id;
} hrx;

/*
 * The protocol switch's handler for PP_PROTO_HAL frames (runs inside pulc_drain() under the
 * area lock): frames of the current run must come in order — message by message, offset by
 * offset — and are copied into hrx.buf; anything else of the run is a gap (a lost frame).
 * Frames of other runs or nodes are stale and ignored.  Returns 0: the frame is consumed.
 */
static int hal_rx_frame(struct pulc_node *n, uint16_t src_node, const struct pulc_hdr *h,
                        const uint8_t *body, uint32_t len, uint64_t rx_tag)
{
    (void)n;
    (void)rx_tag;
    if (!hrx.active || src_node != hrx.peer || h->src_port != hrx.run)
        return 0; /* stale: a run that is over, or not ours */
    if (hrx.gap)
        return 0;
    bool first = (h->flags & PULC_HF_FIRST) != 0;
    if (hrx.pingpong && first && h->msg_id + 1 == hrx.next_msg && hrx.got == 0) {
        /* the other side sent it again: our answer to it was lost or late */
        hrx.reecho = hrx.echoer;
        hrx.reecho_id = h->msg_id;
        return 0;
    }
    if (h->msg_id != hrx.next_msg || h->offset != hrx.got || h->total != hrx.size ||
        first != (h->offset == 0) || len > hrx.size - hrx.got) {
        hrx.gap = true;
        snprintf(hrx.gap_text, sizeof hrx.gap_text,
                 "a HAL frame was lost: expected message %u at offset %u (of %u B), got message "
                 "%u at offset %u (of %u B); a process that does not handle PP_PROTO_HAL "
                 "(psid's NIC thread) drained frames while this one was descheduled" LOSS_HINT,
                 hrx.next_msg, hrx.got, hrx.size, h->msg_id, h->offset, h->total);
        return 0;
    }
    memcpy(hrx.buf + hrx.got, body, len);
    hrx.got += len;
    hrx.frames++;
    if (hrx.got == hrx.size) {
        if (hrx.verify) {
            uint32_t at = 0;
            uint64_t bad = content_check(hrx.buf, hrx.size, hrx.run, hrx.next_msg, &at);
            if (bad && !hrx.bad_msgs)
                snprintf(hrx.first_bad, sizeof hrx.first_bad,
                         "message %u of %u B: %" PRIu64 " bytes differ, the first at offset %u",
                         hrx.next_msg, hrx.size, bad, at);
            hrx.bad_msgs += bad != 0;
            hrx.bad_bytes += bad;
        }
        hrx.msgs++;
        hrx.next_msg++;
        hrx.got = 0;
    }
    return 0;
}

/* Start receiving the run of e: messages of size bytes into buf. */
static void hal_rx_begin(struct ep *e, uint32_t size, uint8_t *buf, bool verify)
{
    memset(&hrx, 0, sizeof hrx);
    hrx.peer = e->peer_node;
    hrx.run = (uint16_t)e->run;
    hrx.size = size;
    hrx.buf = buf;
    hrx.verify = verify;
    hrx.active = true;
}

/* Stop receiving: later frames are stale. */
static void hal_rx_end(void)
{
    hrx.active = false;
}

/*
 * One HAL turn: a firmware pass, the host queue drained through the protocol switch (our
 * handler takes the HAL frames), failed sends of our context.  0 or an error.
 */
static int hal_progress(struct ep *e)
{
    int rc = pulc_hal_poll(me.h);
    if (rc < 0)
        return ep_fail(e, rc, "the NIC lock cannot be taken: %s", strerror(-rc));
    struct mcp_rx_desc d;
    if (pulc_hal_recv_peek(me.h, &d) && (rc = pulc_drain(&me.node, 64)) < 0)
        return ep_fail(e, rc, "the message area lock cannot be taken: %s", strerror(-rc));
    struct mcp_send_error se;
    if (pulc_hal_send_error(me.h, &se))
        return ep_fail(e, se.error ? se.error : -EIO, "a frame to node %u failed: %s", se.dst,
                       nic_error_text(se.error));
    if (hrx.active && hrx.gap)
        return ep_fail(e, -EILSEQ, "%s", hrx.gap_text);
    return 0;
}

/*
 * Send len bytes of buf as message msgno of e's run: frames of at most one NIC payload, the
 * PULC header and data written straight into the send slot (one copy, as port-D's sends
 * do).  While the
 * ring is full the firmware runs here.  Returns when every frame is posted.
 */
static int hal_send(struct ep *e, const uint8_t *buf, uint32_t len, uint32_t msgno)
{
    struct mcp_image *img = me.h->img;
    unsigned ctx = (unsigned)me.h->ctx;
    uint32_t room = pulc_hal_max_payload(me.h) - PULC_HDR_LEN, off = 0;
    struct waiter w = {0};
    do {
        uint32_t slot;
        /* the kernel provider's drainer thread may post a notice meanwhile */
        if (me.node.ring_lock)
            pthread_mutex_lock(me.node.ring_lock);
        uint8_t *b = mcp_send_slot(img, ctx, &slot);
        if (!b) {
            if (me.node.ring_lock)
                pthread_mutex_unlock(me.node.ring_lock);
            int rc = hal_progress(e);
            if (!rc)
                rc = ep_wait_turn(e, &w);
            if (rc)
                return rc;
            continue;
        }
        uint32_t n = len - off < room ? len - off : room;
        struct pulc_hdr hd = {
            PP_PROTO_HAL, off == 0 ? PULC_HF_FIRST : 0, (uint16_t)e->run, 0, 0, msgno, off, len};
        pulc_hdr_put(b, &hd);
        memcpy(b + PULC_HDR_LEN, buf + off, n);
        mcp_send_post(img, ctx, slot, e->peer_node, PULC_HDR_LEN + n, PP_COOKIE);
        if (me.node.ring_lock)
            pthread_mutex_unlock(me.node.ring_lock);
        off += n;
        w = (struct waiter){0};
    } while (off < len);
    return 0;
}

/*
 * Run the HAL until n messages of the run are complete.  The wait starts over at every frame
 * that arrives; HAL_STALL_NS without one is a lost frame (-EILSEQ).  With limit_ns, -EAGAIN
 * when the messages are not complete within limit_ns (ping-pong: send again).  The echoing
 * side of a ping-pong echoes again when the ping comes again.
 */
static int hal_wait_msgs(struct ep *e, uint64_t n, uint64_t limit_ns)
{
    struct waiter w = {0};
    uint64_t frames = hrx.frames, t0 = limit_ns ? mcp_now_ns() : 0;
    for (;;) {
        int rc = hal_progress(e);
        if (rc)
            return rc;
        if (hrx.msgs >= n)
            return 0;
        if (hrx.reecho) {
            hrx.reecho = false;
            if ((rc = hal_send(e, hrx.buf, hrx.size, hrx.reecho_id)))
                return rc;
        }
        if (hrx.frames != frames) {
            frames = hrx.frames;
            w = (struct waiter){0};
        }
        if ((rc = ep_wait_turn(e, &w)))
            return rc;
        if ((w.turn & 63) != 0)
            continue;
        uint64_t now = mcp_now_ns();
        if (limit_ns && now - t0 > limit_ns)
            return -EAGAIN;
        if ((w.turn & 1023) == 0 && w.start && now - w.start > HAL_STALL_NS)
            return ep_fail(e, -EILSEQ,
                           "nothing of the run arrived for %.0f s (waiting for message %u, offset "
                           "%u): a HAL frame was lost (drained by a process without a "
                           "PP_PROTO_HAL handler, e.g. psid's NIC thread)" LOSS_HINT,
                           HAL_STALL_NS / 1e9, hrx.next_msg, hrx.got);
    }
}

/* Keep the firmware running until everything we sent is acknowledged (or failed). */
static int flush_sends(struct ep *e)
{
    struct waiter w = {0};
    e->phase = "waiting for the acknowledgement of our last frames";
    while (pulc_hal_send_busy(me.h)) {
        int rc = hal_progress(e);
        if (!rc)
            rc = ep_wait_turn(e, &w);
        if (rc)
            return rc;
    }
    return 0;
}

/* Why the HAL cannot run in mode m, or NULL. */
static const char *hal_unavailable(enum pp_mode m)
{
    return m == MODE_INTRA ? "the firmware refuses a send to its own node (dst == self): a local "
                             "destination never touches the NIC"
                           : NULL;
}

/*
 * Client: n round trips of size bytes (one frame); us[i] = round trip i / 2 in µs; every echo
 * compared.  A ping whose echo does not come within HAL_RESEND_NS is sent again (a frame lost
 * to another drainer, see "HAL frames"); that round is not counted and one more is made.
 */
static int hal_ping(struct ep *e, uint32_t size, uint64_t n, double *us)
{
    uint8_t *s = pool_get(&send_pool, size), *r = pool_get(&recv_pool, size);
    if (size > pulc_hal_max_payload(me.h) - PULC_HDR_LEN)
        return ep_fail(e, -EMSGSIZE, "a HAL ping-pong message must fit in one frame");
    hal_rx_begin(e, size, r, false);
    hrx.pingpong = true;
    e->phase = "ping-pong";
    uint64_t valid = 0, warm = 0, warm_end = mcp_now_ns() + e->warm_ns;
    for (uint32_t msgno = 0; valid < n; msgno++) {
        bool resent = false;
        content_fill(s, size, e->run, msgno);
        uint64_t t0 = mcp_now_ns();
        int rc = hal_send(e, s, size, msgno);
        while (!rc && (rc = hal_wait_msgs(e, (uint64_t)msgno + 1, HAL_RESEND_NS)) == -EAGAIN) {
            if (++e->resends > HAL_MAX_RESENDS)
                return ep_fail(e, -EILSEQ,
                               "%" PRIu64 " pings or echoes lost: HAL frames are drained by "
                               "another process (psid's NIC thread) all the time",
                               e->resends - 1);
            resent = true;
            rc = hal_send(e, s, size, msgno);
        }
        uint64_t t1 = mcp_now_ns();
        if (rc)
            return rc;
        if (memcmp(s, r, size))
            return ep_fail(e, -EBADMSG, "round trip %u: the echo of %u bytes differs from the ping",
                           msgno, size);
        if (warm < e->warm_rounds || t1 < warm_end)
            warm++;
        else if (!resent)
            us[valid++] = (double)(t1 - t0) / 2000.0;
    }
    hal_rx_end();
    return 0;
}

/*
 * Peer: echo messages of size bytes (again when a ping comes again) until the client says
 * the run is over: it may need more than n rounds when it had to send pings again.
 */
static int hal_pong(struct ep *e, uint32_t size, uint64_t n)
{
    (void)n;
    uint8_t *r = pool_get(&recv_pool, size);
    hal_rx_begin(e, size, r, false);
    hrx.pingpong = hrx.echoer = true;
    e->phase = "echoing";
    int rc = hal_progress(e); /* a pass before "ready": psid sees this node polled */
    if (rc)
        return rc;
    e->ready(e);
    for (uint64_t i = 0;; i++) {
        if ((rc = hal_wait_msgs(e, i + 1, 0)) || (rc = hal_send(e, r, size, (uint32_t)i)))
            return rc;
    }
}

/* Client: stream n messages of size bytes, timed until the peer's done message. */
static int hal_send_stream(struct ep *e, uint32_t size, uint64_t n, bool verify, double *secs)
{
    uint8_t *s = pool_get(&send_pool, size), done[4];
    content_fill(s, size, e->run, 0);
    hal_rx_begin(e, sizeof done, done, false);
    e->phase = "streaming";
    uint64_t t0 = mcp_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        if (verify)
            content_fill(s, size, e->run, i);
        int rc = hal_send(e, s, size, (uint32_t)i);
        if (rc)
            return rc;
    }
    e->phase = "waiting for the receiver's done message";
    int rc = hal_wait_msgs(e, 1, 0);
    uint64_t t1 = mcp_now_ns();
    hal_rx_end();
    if (rc)
        return rc;
    if (get32(done) != (uint32_t)n)
        return ep_fail(e, -EBADMSG, "the done message says %u messages, %" PRIu64 " were sent",
                       get32(done), n);
    *secs = secs_between(t0, t1);
    return 0;
}

/* Peer: receive a stream of n messages of size bytes (checked if verify), send "done". */
static int hal_recv_stream(struct ep *e, uint32_t size, uint64_t n, bool verify)
{
    uint8_t *r = pool_get(&recv_pool, size), done[4];
    hal_rx_begin(e, size, r, verify);
    e->phase = "receiving the stream";
    int rc = hal_progress(e);
    if (rc)
        return rc;
    e->ready(e);
    rc = hal_wait_msgs(e, n, 0);
    e->msgs = hrx.msgs;
    e->bytes = hrx.msgs * size;
    e->bad_msgs = hrx.bad_msgs;
    e->bad_bytes = hrx.bad_bytes;
    snprintf(e->first_bad, sizeof e->first_bad, "%s", hrx.first_bad);
    hal_rx_end();
    if (rc)
        return rc;
    put32(done, (uint32_t)n);
    return hal_send(e, done, sizeof done, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Level portd: PSP_ISend / PSP_IReceive                                                    */
/* ---------------------------------------------------------------------------------------- */

static PSP_Request pd_send[WINDOW], pd_recv[WINDOW], pd_done; /* owned by the library while
                                                                 pending: never on a stack */

/* "node.port" of a port id, in a static buffer of two (for one message). */
static const char *port_text(PSP_PortId id)
{
    static char b[2][24];
    static int k;
    k ^= 1;
    snprintf(b[k], sizeof b[k], "%u.%u", PSP_PORTID_NODE(id), PSP_PORTID_NUMBER(id));
    return b[k];
}

/* Progress until r completes (PSP_Test), checking the port's asynchronous error; then its
 * error. */
static int pd_wait(struct ep *e, PSP_Request *r, const char *what)
{
    struct waiter w = {0};
    while (!PSP_Test(r)) {
        int rc = ep_wait_turn(e, &w);
        if (rc)
            return rc;
        if ((w.turn & 1023) == 0) {
            PSP_PortId about = 0;
            int pe = PSP_GetPortError(me.port, &about);
            if (pe)
                return ep_fail(e, pe, "port %s got an error about %s while %s: %s",
                               port_text(PSP_GetPortId(me.port)), port_text(about), what,
                               PSP_StrError(pe));
        }
    }
    if (r->error)
        return ep_fail(e, r->error, "%s failed: %s", what, PSP_StrError(r->error));
    return 0;
}

/* A completed receive of message i: from the peer, size bytes. */
static int pd_check_recv(struct ep *e, const PSP_Request *r, uint32_t size, uint64_t i)
{
    if (r->src != e->peer_port)
        return ep_fail(e, -EBADMSG, "message %" PRIu64 " came from port %s, not from the peer %s",
                       i, port_text(r->src), port_text(e->peer_port));
    if (r->len != size || r->copied != size)
        return ep_fail(e, -EBADMSG, "message %" PRIu64 " has %u bytes (%u stored), %u were sent", i,
                       r->len, r->copied, size);
    return 0;
}

/* Post a receive of up to len bytes into buf on our port. */
static int pd_post(struct ep *e, PSP_Request *r, void *buf, uint32_t len)
{
    int rc = PSP_IReceive(me.port, NULL, 0, buf, len, NULL, NULL, r);
    return rc ? ep_fail(e, rc, "PSP_IReceive: %s", PSP_StrError(rc)) : 0;
}

/* Start sending len bytes of buf to the peer's port. */
static int pd_isend(struct ep *e, PSP_Request *r, const void *buf, uint32_t len)
{
    int rc = PSP_ISend(me.port, e->peer_port, NULL, 0, buf, len, r);
    return rc ? ep_fail(e, rc, "PSP_ISend to port %s: %s", port_text(e->peer_port),
                        PSP_StrError(rc))
              : 0;
}

/* Client: n round trips (receive posted before the ping); us[i] = round trip / 2 in µs. */
static int pd_ping(struct ep *e, uint32_t size, uint64_t n, double *us)
{
    uint8_t *s = pool_get(&send_pool, size), *r = pool_get(&recv_pool, size);
    e->phase = "ping-pong";
    uint64_t valid = 0, warm = 0, warm_end = mcp_now_ns() + e->warm_ns;
    for (uint64_t i = 0; valid < n; i++) {
        content_fill(s, size, e->run, i);
        uint64_t t0 = mcp_now_ns();
        int rc = pd_post(e, &pd_recv[0], r, size);
        if (!rc)
            rc = pd_isend(e, &pd_send[0], s, size);
        if (!rc)
            rc = pd_wait(e, &pd_send[0], "sending a ping");
        if (!rc)
            rc = pd_wait(e, &pd_recv[0], "receiving an echo");
        uint64_t t1 = mcp_now_ns();
        if (!rc)
            rc = pd_check_recv(e, &pd_recv[0], size, i);
        if (rc)
            return rc;
        if (memcmp(s, r, size))
            return ep_fail(e, -EBADMSG,
                           "round trip %" PRIu64 ": the echo of %u bytes differs from the ping", i,
                           size);
        if (warm < e->warm_rounds || t1 < warm_end)
            warm++;
        else
            us[valid++] = (double)(t1 - t0) / 2000.0;
    }
    return 0;
}

/*
 * Peer: echo messages until the client ends the run (it makes warm-up rounds first); the
 * receive of the next ping is posted before this one is echoed, and cancelled at the end.
 */
static int pd_pong(struct ep *e, uint32_t size, uint64_t n)
{
    (void)n;
    uint8_t *b = pool_get(&recv_pool, 2 * (size_t)size);
    e->phase = "echoing";
    int rc = pd_post(e, &pd_recv[0], b, size);
    if (rc)
        return rc;
    e->ready(e);
    for (uint64_t i = 0;; i++) {
        PSP_Request *r = &pd_recv[i & 1];
        uint8_t *cur = b + (i & 1) * (size_t)size;
        if ((rc = pd_wait(e, r, "receiving a ping"))) {
            PSP_Cancel(r); /* the run is over (or failed) with this receive still posted */
            return rc;
        }
        if ((rc = pd_check_recv(e, r, size, i)) ||
            (rc = pd_post(e, &pd_recv[(i + 1) & 1], b + ((i + 1) & 1) * size, size)))
            return rc;
        if ((rc = pd_isend(e, &pd_send[0], cur, size)) ||
            (rc = pd_wait(e, &pd_send[0], "sending an echo")))
            return rc;
    }
}

/*
 * Client: stream n messages of size bytes with up to WINDOW sends in flight, timed until the
 * peer's done message.  Timed passes send from buffers filled once; the verified pass fills
 * message i's buffer before sending it (its previous send has completed by then).
 */
static int pd_send_stream(struct ep *e, uint32_t size, uint64_t n, bool verify, double *secs)
{
    uint32_t nbuf = slots_for(size, 1), window = verify ? nbuf : WINDOW;
    uint8_t *bufs = pool_get(&send_pool, (size_t)nbuf * size), done[8];
    for (uint32_t b = 0; b < nbuf && !verify; b++)
        content_fill(bufs + (size_t)b * size, size, e->run, b);
    int rc = pd_post(e, &pd_done, done, sizeof done);
    if (rc)
        return rc;
    e->phase = "streaming";
    uint64_t t0 = mcp_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        PSP_Request *r = &pd_send[i % window];
        if (i >= window && (rc = pd_wait(e, r, "streaming")))
            return rc;
        uint8_t *b = bufs + (i % nbuf) * (size_t)size;
        if (verify)
            content_fill(b, size, e->run, i);
        if ((rc = pd_isend(e, r, b, size)))
            return rc;
    }
    for (uint64_t i = n > window ? n - window : 0; i < n; i++)
        if ((rc = pd_wait(e, &pd_send[i % window], "streaming")))
            return rc;
    e->phase = "waiting for the receiver's done message";
    rc = pd_wait(e, &pd_done, "receiving the done message");
    uint64_t t1 = mcp_now_ns();
    if (rc || (rc = pd_check_recv(e, &pd_done, 4, n)))
        return rc;
    if (get32(done) != (uint32_t)n)
        return ep_fail(e, -EBADMSG, "the done message says %u messages, %" PRIu64 " were sent",
                       get32(done), n);
    *secs = secs_between(t0, t1);
    return 0;
}

/* Peer: receive n messages with up to WINDOW receives posted (checked if verify), "done". */
static int pd_recv_stream(struct ep *e, uint32_t size, uint64_t n, bool verify)
{
    uint32_t slots = slots_for(size, 2);
    uint8_t *bufs = pool_get(&recv_pool, (size_t)slots * size), done[4];
    int rc = 0;
    e->phase = "receiving the stream";
    for (uint64_t i = 0; i < n && i < slots && !rc; i++)
        rc = pd_post(e, &pd_recv[i], bufs + i * (size_t)size, size);
    if (rc)
        return rc;
    e->ready(e);
    for (uint64_t i = 0; i < n; i++) {
        PSP_Request *r = &pd_recv[i % slots];
        uint8_t *b = bufs + (i % slots) * (size_t)size;
        if ((rc = pd_wait(e, r, "receiving the stream")) || (rc = pd_check_recv(e, r, size, i)))
            return rc;
        if (verify) {
            uint32_t at = 0;
            uint64_t bad = content_check(b, size, e->run, i, &at);
            if (bad && !e->bad_msgs)
                snprintf(e->first_bad, sizeof e->first_bad,
                         "message %" PRIu64 " of %u B: %" PRIu64
                         " bytes differ, the first at offset %u",
                         i, size, bad, at);
            e->bad_msgs += bad != 0;
            e->bad_bytes += bad;
        }
        e->msgs++;
        e->bytes += size;
        if (i + slots < n && (rc = pd_post(e, r, b, size)))
            return rc;
    }
    put32(done, (uint32_t)n);
    if ((rc = pd_isend(e, &pd_send[0], done, sizeof done)))
        return rc;
    return pd_wait(e, &pd_send[0], "sending the done message");
}

/* ---------------------------------------------------------------------------------------- */
/* The levels                                                                               */
/* ---------------------------------------------------------------------------------------- */

struct level {
    const char *name;                           /* on the command line and in the CSV */
    const char *title;                          /* in the output */
    bool lossy;                                 /* a lost frame is possible (HAL): measure again */
    const char *(*unavailable)(enum pp_mode m); /* why not in mode m, or NULL */
    int (*ping)(struct ep *e, uint32_t size, uint64_t n, double *us);
    int (*pong)(struct ep *e, uint32_t size, uint64_t n);
    int (*send_stream)(struct ep *e, uint32_t size, uint64_t n, bool verify, double *secs);
    int (*recv_stream)(struct ep *e, uint32_t size, uint64_t n, bool verify);
};

static const struct level levels[NLEVELS] = {
    [LVL_HAL] = {"hal", "HAL fragments (send slot, firmware, host queue, own handler)", true,
                 hal_unavailable, hal_ping, hal_pong, hal_send_stream, hal_recv_stream},
    [LVL_PORTD] = {"portd", "port-D (PSP_ISend / PSP_IReceive)", false, NULL, pd_ping, pd_pong,
                   pd_send_stream, pd_recv_stream},
    /* [LVL_RAW]: rawdata (pulc.h section "rawdata"): the receiver registers its buffer and
     * passes the handle in its READY reply; send_stream writes into it, recv_stream waits for
     * the bytes.  Add it to enum pp_level, parse_levels() and the CSV names. */
};

/* Attach this process (PSP_Init), open its port-D port and plug the HAL handler in. */
static int proc_attach(char *err, size_t n)
{
    int rc = PSP_Init();
    if (rc) {
        snprintf(err, n, "%s", PSP_StrError(rc));
        return rc;
    }
    me.h = pulc_hal_self();
    me.self = (uint16_t)PSP_GetNodeID();
    me.node.area = me.h->area;
    me.node.img = me.h->img;
    me.node.ctx = me.h->ctx;
    me.node.node_id = me.self;
    if (me.h->kernel) { /* the kernel provider (psk_dev.h) */
        me.node.settle = pulc_dev_settle;
        me.node.dev_fd = me.h->dev;
        me.node.ring_lock = &me.h->ring_lock;
    }
    rc = PSP_OpenPort(PSP_ANYPORT, PSP_PORT_D, &me.port);
    if (rc) {
        snprintf(err, n, "cannot open a port-D port: %s", PSP_StrError(rc));
        return rc;
    }
    rc = pulc_proto_register(PP_PROTO_HAL, hal_rx_frame);
    if (rc)
        snprintf(err, n, "cannot register the HAL handler: %s", strerror(-rc));
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Client <-> peer control (socketpair)                                                     */
/* ---------------------------------------------------------------------------------------- */

enum pp_op { OP_ATTACH = 1, OP_ECHO, OP_SINK, OP_ABORT, OP_END, OP_QUIT };
enum pp_rtype { R_READY = 1, R_DONE };

struct pp_cmd {
    uint32_t op, seq, level, size;
    uint64_t count;
    uint32_t run, verify;
    uint32_t peer_node; /* the client's node and port */
    PSP_PortId peer_port;
    uint64_t timeout_ns;
};

struct pp_reply {
    uint32_t type, seq;
    int32_t rc;
    uint32_t node;
    PSP_PortId port;
    uint32_t pad;
    uint64_t msgs, bytes, bad_msgs, bad_bytes;
    uint64_t malformed; /* frames the node's drains dropped during the run (rx_malformed) */
    char text[400];
};

/* The client's view of one peer process. */
struct peer {
    enum pp_mode mode;
    pid_t pid;
    int fd;             /* our end of the socketpair */
    const char *socket; /* the psid it attaches to (or the device, with device) */
    bool device;
    bool attached, dead;
    uint16_t node;
    PSP_PortId port;
    uint32_t seq;
    struct pp_reply pending; /* a reply read while a run was going on */
    bool have_pending;
    char death[160];
};
static struct peer peers[NMODES];

/* ---- the peer process ---- */

static int peer_fd = -1;
static uint32_t peer_seq; /* the command being run */
static bool peer_end;     /* the client ended the run (an echo run ends so) */

/* Send a reply to the client (the client gone: exit). */
static void peer_reply(const struct pp_reply *r)
{
    if (send(peer_fd, r, sizeof *r, MSG_NOSIGNAL) != (ssize_t)sizeof *r)
        _exit(EXIT_FAIL);
}

/* Peer: the run is set up (receives posted, handler armed): tell the client. */
static void peer_ready(struct ep *e)
{
    (void)e;
    struct pp_reply r;
    memset(&r, 0, sizeof r);
    r.type = R_READY;
    r.seq = peer_seq;
    peer_reply(&r);
}

/* Peer: has the client aborted the run (or gone away)? */
static int peer_stop(struct ep *e)
{
    struct pollfd pf = {peer_fd, POLLIN, 0};
    while (poll(&pf, 1, 0) > 0) {
        struct pp_cmd c;
        ssize_t n = recv(peer_fd, &c, sizeof c, MSG_DONTWAIT);
        if (n == 0)
            _exit(EXIT_FAIL); /* the client is gone */
        if (n != (ssize_t)sizeof c)
            return 0;
        if ((c.op == OP_ABORT || c.op == OP_END) && c.seq == peer_seq) {
            peer_end = c.op == OP_END;
            ep_fail(e, -ECANCELED, "aborted by the client");
            return 1;
        }
    }
    return 0;
}

/* Peer: run an ECHO or SINK command and reply DONE with the outcome. */
static void peer_run(const struct pp_cmd *c)
{
    struct ep e;
    struct pp_reply r;
    memset(&e, 0, sizeof e);
    memset(&r, 0, sizeof r);
    e.peer_node = (uint16_t)c->peer_node;
    e.peer_port = c->peer_port;
    e.run = c->run;
    e.deadline = mcp_now_ns() + c->timeout_ns;
    e.stop = peer_stop;
    e.ready = peer_ready;
    e.phase = "starting";
    peer_seq = c->seq;
    peer_end = false;
    uint64_t malformed = me.h->area->rx_malformed;
    int rc;
    if (c->level >= NLEVELS)
        rc = ep_fail(&e, -EINVAL, "unknown level %u", c->level);
    else if (c->op == OP_ECHO)
        rc = levels[c->level].pong(&e, c->size, c->count);
    else
        rc = levels[c->level].recv_stream(&e, c->size, c->count, c->verify != 0);
    if (rc == -ECANCELED && peer_end)
        rc = 0; /* an echo run is over when the client says so */
    if (!rc)
        rc = flush_sends(&e);
    if (rc && c->level == LVL_HAL)
        hal_rx_end();
    r.type = R_DONE;
    r.seq = c->seq;
    r.rc = rc;
    r.node = me.self;
    r.msgs = e.msgs;
    r.bytes = e.bytes;
    r.bad_msgs = e.bad_msgs;
    r.bad_bytes = e.bad_bytes;
    r.malformed = me.h->area->rx_malformed - malformed;
    snprintf(r.text, sizeof r.text, "%s", rc ? e.err : e.first_bad);
    peer_reply(&r);
}

/* The peer process: attach when told (to sock, or to the device sock), then serve commands
 * until QUIT. */
static void peer_main(int fd, const char *sock, bool device)
{
    peer_fd = fd;
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    psp_log_init(PROG " peer");
    if (sock)
        setenv(device ? "PSP_DEVICE" : "PSP_PSID_SOCKET", sock, 1);
    bool attached = false;
    for (;;) {
        struct pp_cmd c;
        ssize_t n = recv(fd, &c, sizeof c, 0);
        if (n <= 0)
            _exit(n == 0 ? EXIT_OK : EXIT_FAIL);
        if (n != (ssize_t)sizeof c)
            continue;
        struct pp_reply r;
        memset(&r, 0, sizeof r);
        switch (c.op) {
        case OP_ATTACH:
            r.type = R_DONE;
            r.seq = c.seq;
            r.rc = attached ? 0 : proc_attach(r.text, sizeof r.text);
            attached = r.rc == 0;
            if (attached) {
                r.node = me.self;
                r.port = PSP_GetPortId(me.port);
            }
            peer_reply(&r);
            break;
        case OP_ECHO:
        case OP_SINK:
            if (!attached) {
                r.type = R_DONE;
                r.seq = c.seq;
                r.rc = -ENOTCONN;
                snprintf(r.text, sizeof r.text, "not attached");
                peer_reply(&r);
                break;
            }
            peer_run(&c);
            break;
        case OP_QUIT:
            if (attached)
                PSP_Finalize();
            _exit(EXIT_OK);
        default: /* OP_ABORT or OP_END of a run that is over */
            break;
        }
    }
}

/* ---- the client's side ---- */

/* Fork the peer of mode m, attaching (later) to sock. */
static void peer_spawn(struct peer *p, enum pp_mode m, const char *sock, bool device)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
        psp_fail_exit("socketpair: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        psp_fail_exit("fork: %s", strerror(errno));
    if (pid == 0) {
        close(sv[0]);
        for (int k = 0; k < NMODES; k++)
            if (peers[k].pid > 0)
                close(peers[k].fd);
        peer_main(sv[1], sock, device);
        _exit(EXIT_OK);
    }
    close(sv[1]);
    memset(p, 0, sizeof *p);
    p->mode = m;
    p->pid = pid;
    p->fd = sv[0];
    p->socket = sock;
    p->device = device;
}

/* The peer died: reap it and describe how into p->death. */
static void peer_died(struct peer *p)
{
    int st = 0;
    char how[96] = "closed its control socket";
    p->dead = true;
    for (int i = 0; i < 100; i++) {
        pid_t w = waitpid(p->pid, &st, WNOHANG);
        if (w == p->pid) {
            describe_status(st, how, sizeof how);
            p->pid = -1;
            break;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    snprintf(p->death, sizeof p->death, "the %s peer process %s", mode_name[p->mode], how);
}

/*
 * Read one reply within timeout_ms (0: only if one is there; the wait runs the NIC so that
 * our acknowledgements flow while the peer finishes).  1 read, 0 none, -1 the peer died.
 */
static int peer_read(struct peer *p, int timeout_ms, struct pp_reply *r)
{
    if (p->dead)
        return -1;
    uint64_t end = mcp_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        struct pollfd pf = {p->fd, POLLIN, 0};
        int k = poll(&pf, 1, 0);
        if (k > 0) {
            ssize_t n = recv(p->fd, r, sizeof *r, MSG_DONTWAIT);
            if (n == (ssize_t)sizeof *r)
                return 1;
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                peer_died(p);
                return -1;
            }
            continue;
        }
        if (mcp_now_ns() >= end)
            return 0;
        if (me.h && me.h->ctx >= 0) {
            pulc_hal_poll(me.h);
            struct mcp_rx_desc d;
            if (pulc_hal_recv_peek(me.h, &d))
                pulc_drain(&me.node, 64);
        }
        sched_yield();
    }
}

/* Wait for the reply of type to command seq (earlier ones are dropped): 0, or -1 with why. */
static int peer_wait_reply(struct peer *p, uint32_t seq, uint32_t type, int timeout_ms,
                           struct pp_reply *r, char *why, size_t n)
{
    uint64_t end = mcp_now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        int k;
        if (p->have_pending) {
            *r = p->pending;
            p->have_pending = false;
            k = 1;
        } else {
            uint64_t now = mcp_now_ns();
            int left = now >= end ? 0 : (int)((end - now) / 1000000u) + 1;
            k = peer_read(p, left, r);
        }
        if (k < 0) {
            snprintf(why, n, "%s", p->death);
            return -1;
        }
        if (k == 0) {
            snprintf(why, n, "the %s peer (node %u) did not answer within %d s", mode_name[p->mode],
                     p->node, timeout_ms / 1000);
            return -1;
        }
        if (r->seq != seq)
            continue;
        if (r->type == type)
            return 0;
        if (r->type == R_DONE) { /* finished (failed) before the reply we wait for */
            snprintf(why, n, "node %u: %s", r->node, r->text[0] ? r->text : "failed");
            return -1;
        }
    }
}

/* Send command c to p: 0, or -1 with why. */
static int peer_command(struct peer *p, struct pp_cmd *c, char *why, size_t n)
{
    c->seq = ++p->seq;
    if (p->dead || send(p->fd, c, sizeof *c, MSG_NOSIGNAL) != (ssize_t)sizeof *c) {
        if (!p->dead)
            peer_died(p);
        snprintf(why, n, "%s", p->death);
        return -1;
    }
    return 0;
}

/* Client: stop when the peer reported a failure of this run or died. */
static int client_stop(struct ep *e)
{
    struct peer *p = e->ctl;
    if (!p->have_pending) {
        int k = peer_read(p, 0, &p->pending);
        if (k < 0) {
            e->peer_rc = -EPIPE;
            ep_fail(e, -EPIPE, "%s", p->death);
            return 1;
        }
        p->have_pending = k > 0;
    }
    if (p->have_pending && p->pending.seq != p->seq)
        p->have_pending = false; /* left over */
    if (p->have_pending && p->pending.type == R_DONE && p->pending.rc) {
        const struct pp_reply *r = &p->pending;
        e->peer_rc = r->rc;
        if (r->malformed)
            ep_fail(e, r->rc, "node %u: %s (frames dropped there as malformed: %" PRIu64 ")",
                    r->node, r->text, r->malformed);
        else
            ep_fail(e, r->rc, "node %u: %s", r->node, r->text);
        return 1;
    }
    return 0;
}

/* What one measurement produced. */
struct outcome {
    double secs;         /* stream: time until the done message */
    double *us;          /* ping: per round trip */
    bool brief_warmup;   /* ping: a later block of a level (WARM_BLOCK_NS, not WARM_NS) */
    uint64_t resends;    /* ping: pings sent again (HAL) */
    struct pp_reply res; /* the peer's DONE */
};

/* One measurement with the peer: command, READY, our side, DONE.  0 or an error (why). */
static int measure_once(struct peer *p, enum pp_level lv, enum pp_op op, uint32_t size,
                        uint64_t count, bool verify, struct outcome *out, char *why, size_t n)
{
    static uint32_t run_counter;
    struct ep e;
    memset(&e, 0, sizeof e);
    e.peer_node = p->node;
    e.peer_port = p->port;
    e.run = (uint32_t)(((uint32_t)getpid() * 977u + ++run_counter) & 0xffffu);
    if (!e.run)
        e.run = 1;
    e.deadline = mcp_now_ns() + o.timeout_s * 1000000000ull;
    e.stop = client_stop;
    e.ctl = p;
    e.warm_rounds = o.warmup;
    e.warm_ns = out->brief_warmup ? WARM_BLOCK_NS : WARM_NS;
    e.phase = "starting";
    struct pp_cmd c = {op,
                       0,
                       lv,
                       size,
                       count,
                       e.run,
                       verify,
                       me.self,
                       PSP_GetPortId(me.port),
                       o.timeout_s * 1000000000ull};
    struct pp_reply r;
    if (peer_command(p, &c, why, n) || peer_wait_reply(p, c.seq, R_READY, 30000, &r, why, n))
        return -EPIPE;
    int rc = op == OP_ECHO ? levels[lv].ping(&e, size, count, out->us)
                           : levels[lv].send_stream(&e, size, count, verify, &out->secs);
    if (rc) {
        if (lv == LVL_HAL)
            hal_rx_end();
        snprintf(why, n, "%s", e.err);
        if (e.peer_rc) /* the peer failed (its DONE is read) or died */
            return e.peer_rc;
        /* Stop the peer's side and wait until it has, so the next run starts clean. */
        struct pp_cmd a = {OP_ABORT, c.seq, 0, 0, 0, 0, 0, 0, 0, 0};
        char ignored[64];
        if (!p->dead && send(p->fd, &a, sizeof a, MSG_NOSIGNAL) == (ssize_t)sizeof a)
            peer_wait_reply(p, c.seq, R_DONE, 5000, &r, ignored, sizeof ignored);
        return rc;
    }
    out->resends = e.resends;
    if (op == OP_ECHO) { /* the peer echoes until told that the run is over */
        struct pp_cmd end = {OP_END, c.seq, 0, 0, 0, 0, 0, 0, 0, 0};
        if (send(p->fd, &end, sizeof end, MSG_NOSIGNAL) != (ssize_t)sizeof end && !p->dead)
            peer_died(p);
    }
    if (peer_wait_reply(p, c.seq, R_DONE, (int)o.timeout_s * 1000, &r, why, n))
        return -EPIPE;
    if (r.rc) {
        snprintf(why, n, "node %u: %s", r.node, r.text);
        return r.rc;
    }
    out->res = r;
    return 0;
}

/* A measurement, repeated after a lost HAL frame (--retries).  0 or an error (why). */
static int measure(struct peer *p, enum pp_level lv, enum pp_op op, uint32_t size, uint64_t count,
                   bool verify, struct outcome *out, unsigned *retries, char *why, size_t n)
{
    for (uint64_t attempt = 0;; attempt++) {
        int rc = measure_once(p, lv, op, size, count, verify, out, why, n);
        if (!rc || !levels[lv].lossy || rc != -EILSEQ || attempt >= o.retries)
            return rc;
        (*retries)++;
        printf("  (%u B: %s; measuring again)\n", size, why);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Results                                                                                  */
/* ---------------------------------------------------------------------------------------- */

enum cell_state { CELL_NOT_RUN, CELL_NA, CELL_DONE, CELL_FAILED };

struct lat {
    uint32_t size;
    double med, mean, min, max; /* mean: what OSU's latency reports, tail included */
    bool valid;
};

struct tput {
    uint32_t size;
    uint64_t msgs;
    double secs;
    bool valid;
};

/* One level in one mode. */
struct cell {
    enum cell_state state;
    char why[1024]; /* n/a, not run or failed: why */
    struct lat lat[2];
    struct tput tp[MAX_SIZES];
    unsigned ntp;
    double peak, big, nhalf; /* MB/s, MB/s at BIG_SIZE (0: not measured), bytes */
    uint32_t peak_size;
    bool nhalf_below; /* half the peak was reached by the smallest size already */
    int verified;     /* -1 not run, 0 failed, 1 OK */
    uint64_t vmsgs, vbytes;
    unsigned vsizes, retries;
    uint64_t resends;
};
static struct cell cells[NMODES][NLEVELS];
static const uint32_t lat_sizes[2] = {4, 8}; /* the ping-pong sizes: cell.lat[0], lat[1] */

/*
 * Port-D's latency over the HAL's, per mode and ping-pong size: the median over the latency
 * blocks of (port-D's block median - the HAL's block median).  The blocks alternate between
 * the levels, so each difference is taken between figures measured a few ms apart.  The host
 * moves this VM's vCPUs near and far apart within seconds, which moves every latency by
 * microseconds: the difference of two separately measured medians measured that move as much
 * as the layer.
 */
struct over_hal {
    bool valid;
    unsigned blocks;
    double med, min, max;
};
static struct over_hal over_hal[NMODES][2];
static double memcpy_mbps;      /* 4 MiB between the same two (cached) buffers, for information */
static double memcpy_wide_mbps; /* the reference: 4 MiB over the buffers of a port-D stream */
static unsigned memcpy_reps, memcpy_nsrc, memcpy_ndst;
static unsigned failures;
static char fail_why[8][1400];

/* Count a failure and keep its text for the verdict. */
static void add_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void add_failure(const char *fmt, ...)
{
    va_list ap;
    if (failures < 8) {
        va_start(ap, fmt);
        vsnprintf(fail_why[failures], sizeof fail_why[0], fmt, ap);
        va_end(ap);
    }
    failures++;
}

/* MB/s of a stream. */
static double mbps(const struct tput *t)
{
    return t->secs > 0 ? (double)t->size * (double)t->msgs / t->secs / 1e6 : 0;
}

/* Print s and pad to width columns (µ and ½ are two bytes but one column). */
static void print_padded(const char *s, int width, bool right)
{
    int cols = 0;
    for (const char *q = s; *q; q++)
        cols += ((unsigned char)*q & 0xc0) != 0x80;
    if (right)
        for (int i = cols; i < width; i++)
            putchar(' ');
    fputs(s, stdout);
    if (!right)
        for (int i = cols; i < width; i++)
            putchar(' ');
}

/* Peak, throughput at BIG_SIZE and N½ of c's streams. */
static void summarize_streams(struct cell *c)
{
    c->peak = 0;
    for (unsigned i = 0; i < c->ntp; i++) {
        double m = mbps(&c->tp[i]);
        if (m > c->peak) {
            c->peak = m;
            c->peak_size = c->tp[i].size;
        }
        if (c->tp[i].size == BIG_SIZE)
            c->big = m;
    }
    double half = c->peak / 2;
    for (unsigned i = 0; i < c->ntp; i++) {
        double m = mbps(&c->tp[i]);
        if (m < half)
            continue;
        if (i == 0) {
            c->nhalf = c->tp[0].size;
            c->nhalf_below = true;
        } else { /* interpolate on log2(size) between the sizes around half the peak */
            double m0 = mbps(&c->tp[i - 1]), l0 = log2(c->tp[i - 1].size), l1 = log2(c->tp[i].size);
            double f = m > m0 ? (half - m0) / (m - m0) : 1;
            c->nhalf = exp2(l0 + f * (l1 - l0));
        }
        break;
    }
}

/* The median of v[0..n), n > 0 (sorted in place). */
static double median_of(double *v, uint64_t n)
{
    qsort(v, n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median, mean, min and max of v[0..n) (sorted in place). */
static void lat_stats(double *v, uint64_t n, struct lat *l)
{
    l->med = median_of(v, n);
    l->min = v[0];
    l->max = v[n - 1];
    double sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += v[i];
    l->mean = sum / (double)n;
    l->valid = true;
}

/* ---------------------------------------------------------------------------------------- */
/* Running the measurements                                                                 */
/* ---------------------------------------------------------------------------------------- */

/* Messages streamed for size: the volume, within --min-msgs .. --max-msgs. */
static uint64_t stream_count(uint32_t size, uint64_t volume, uint64_t lo, uint64_t hi)
{
    uint64_t n = volume / size;
    return n < lo ? lo : n > hi ? hi : n;
}

/*
 * The message count for a stream of size-byte messages that lasts --min-run-ms, given that
 * cnt took secs; cnt when it did (at most 2^21 messages and 4 GiB).
 */
static uint64_t longer_count(uint32_t size, uint64_t cnt, double secs)
{
    double want = o.min_run_ms / 1e3;
    if (secs >= want)
        return cnt;
    double n = secs > 0 ? (double)cnt * want / secs * 1.2 : (double)cnt * 100;
    double cap = (double)(4ull << 30) / size;
    if (cap > 2097152)
        cap = 2097152;
    if (n > cap)
        n = cap;
    return n > (double)cnt ? (uint64_t)n : cnt;
}

/* Mark c failed with why (and count it). */
static void cell_fail(struct cell *c, enum pp_level lv, enum pp_mode m, const char *what,
                      const char *why)
{
    c->state = CELL_FAILED;
    snprintf(c->why, sizeof c->why, "%s: %s", what, why);
    printf("  FAILED: %s: %s\n", what, why);
    add_failure("%s, %s: %s: %s", levels[lv].name, mode_name[m], what, why);
}

/*
 * The latencies of every level with peer p, printed: per ping-pong size, o.blocks blocks of
 * o.reps / o.blocks round trips per level, one level's block after the other's, so that both
 * levels see the same moves of the host; then over_hal from the block medians.  A level that
 * fails is marked failed (its streams are not run).
 */
static void run_latencies(struct peer *p)
{
    enum pp_mode m = p->mode;
    bool on[NLEVELS];
    unsigned non = 0;
    for (int lv = 0; lv < NLEVELS; lv++) {
        on[lv] = o.level[lv] && !(levels[lv].unavailable && levels[lv].unavailable(m));
        non += on[lv];
    }
    if (!non)
        return;
    unsigned nb = (unsigned)o.blocks;
    uint64_t per = o.reps / nb, extra = o.reps % nb;
    double *us[NLEVELS] = {NULL}, *bmed[NLEVELS] = {NULL};
    double *diff = calloc(nb, sizeof(double)), *scratch = calloc(per + 1, sizeof(double));
    for (int lv = 0; lv < NLEVELS; lv++)
        if (on[lv] && (!(us[lv] = calloc(o.reps, sizeof(double))) ||
                       !(bmed[lv] = calloc(nb, sizeof(double)))))
            psp_fail_exit("out of memory");
    if (!diff || !scratch)
        psp_fail_exit("out of memory");
    printf("\nlatency, %s: node %u <-> node %u; round trip / 2 in µs, %" PRIu64
           " round trips per level after %" PRIu64 " (and at least %.0f ms of) warm-up ones,\n"
           "  every echo compared; in %u blocks per size, the levels' blocks alternating (a later "
           "block warms up\n  %" PRIu64 " round trips and %.0f ms)\n",
           mode_name[m], me.self, p->node, o.reps, o.warmup, WARM_NS / 1e6, nb, o.warmup,
           WARM_BLOCK_NS / 1e6);
    printf("  %-6s %8s %12s %12s %12s %12s\n", "level", "bytes", "median", "mean", "min", "max");
    for (int k = 0; k < 2 && non; k++) {
        for (unsigned b = 0; b < nb && non; b++) {
            uint64_t cnt = per + (b < extra), off = b * per + (b < extra ? b : extra);
            for (int lv = 0; lv < NLEVELS && non; lv++) {
                if (!on[lv])
                    continue;
                struct cell *c = &cells[m][lv];
                struct outcome out;
                char what[80], why[1024];
                memset(&out, 0, sizeof out);
                out.us = us[lv] + off;
                out.brief_warmup = b > 0;
                if (measure(p, (enum pp_level)lv, OP_ECHO, lat_sizes[k], cnt, false, &out,
                            &c->retries, why, sizeof why)) {
                    snprintf(what, sizeof what, "%s ping-pong %u B, block %u of %u",
                             levels[lv].name, lat_sizes[k], b + 1, nb);
                    cell_fail(c, (enum pp_level)lv, m, what, why);
                    on[lv] = false;
                    non--;
                    if (lv == LVL_PORTD || p->dead) { /* port-D's state is not recoverable */
                        /* the other levels' blocks of this size are incomplete: none counts */
                        memset(on, 0, sizeof on);
                        non = 0;
                    }
                    continue;
                }
                c->resends += out.resends;
                memcpy(scratch, out.us, cnt * sizeof(double)); /* us stays in time order */
                bmed[lv][b] = median_of(scratch, cnt);
            }
        }
        for (int lv = 0; lv < NLEVELS; lv++) {
            if (!on[lv])
                continue;
            struct lat *l = &cells[m][lv].lat[k];
            l->size = lat_sizes[k];
            lat_stats(us[lv], o.reps, l);
            printf("  %-6s %8u %12.2f %12.2f %12.2f %12.2f\n", levels[lv].name, l->size, l->med,
                   l->mean, l->min, l->max);
        }
        if (on[LVL_HAL] && on[LVL_PORTD]) {
            struct over_hal *a = &over_hal[m][k];
            for (unsigned b = 0; b < nb; b++)
                diff[b] = bmed[LVL_PORTD][b] - bmed[LVL_HAL][b];
            a->med = median_of(diff, nb);
            a->min = diff[0];
            a->max = diff[nb - 1];
            a->blocks = nb;
            a->valid = true;
            printf("  port-D over the HAL at %u B: %+.2f µs, the median of the %u blocks' "
                   "differences (%+.2f .. %+.2f)\n",
                   lat_sizes[k], a->med, nb, a->min, a->max);
        }
    }
    for (int lv = 0; lv < NLEVELS; lv++) {
        if (cells[m][lv].resends)
            printf("  (%s: %" PRIu64 " pings sent again after a lost frame: those round trips are "
                   "not counted)\n",
                   levels[lv].name, cells[m][lv].resends);
        free(us[lv]);
        free(bmed[lv]);
    }
    free(diff);
    free(scratch);
}

/* The other measurements of level lv with peer p: streams, verified pass; printed. */
static void run_cell(struct peer *p, enum pp_level lv)
{
    enum pp_mode m = p->mode;
    struct cell *c = &cells[m][lv];
    char why[1024];
    c->verified = -1;
    printf("\n%s, %s: node %u <-> node %u, %s\n", levels[lv].name, mode_name[m], me.self, p->node,
           levels[lv].title);
    const char *na = levels[lv].unavailable ? levels[lv].unavailable(m) : NULL;
    if (na) {
        c->state = CELL_NA;
        snprintf(c->why, sizeof c->why, "%s", na);
        printf("  n/a: %s\n", na);
        return;
    }

    if (c->state == CELL_FAILED) {
        printf("  not run: the latency failed (above)\n");
        return;
    }
    struct outcome out;
    memset(&out, 0, sizeof out);

    /* warm-up stream at the largest size (area fragments and buffers get their pages) */
    uint32_t largest = o.sizes[o.nsizes - 1];
    if (measure(p, lv, OP_SINK, largest, stream_count(largest, o.volume / 4, 2, 64), false, &out,
                &c->retries, why, sizeof why)) {
        cell_fail(c, lv, m, "warm-up stream", why);
        return;
    }

    /* timed streams */
    printf("  streaming node %u -> node %u, timed until the receiver's done message (length, "
           "order and\n  sender of every message checked, content not: see the verified pass)\n",
           me.self, p->node);
    printf("  each size streamed %" PRIu64 " time(s), the fastest counts (MB/s of the slowest "
           "beside it)\n",
           o.stream_reps);
    printf("  %12s %10s %10s %12s %10s %12s\n", "bytes", "messages", "time s", "MB/s", "Gbit/s",
           "slowest");
    for (unsigned i = 0; i < o.nsizes; i++) {
        uint32_t s = o.sizes[i];
        uint64_t cnt = stream_count(s, o.volume, o.min_msgs, o.max_msgs);
        struct tput *t = &c->tp[c->ntp];
        double slowest = 0;
        bool calibrated = false;
        for (uint64_t k = 0; k < o.stream_reps;) {
            char what[64];
            snprintf(what, sizeof what, "stream of %" PRIu64 " x %u B", cnt, s);
            if (measure(p, lv, OP_SINK, s, cnt, false, &out, &c->retries, why, sizeof why)) {
                cell_fail(c, lv, m, what, why);
                summarize_streams(c);
                return;
            }
            uint64_t more = longer_count(s, cnt, out.secs);
            if (!calibrated && more > cnt) { /* too short to count: that was a warm-up */
                calibrated = true;
                cnt = more;
                continue;
            }
            calibrated = true;
            if (!t->valid || out.secs < t->secs)
                t->secs = out.secs;
            if (out.secs > slowest)
                slowest = out.secs;
            t->size = s;
            t->msgs = cnt;
            t->valid = true;
            k++;
        }
        c->ntp++;
        printf("  %12u %10" PRIu64 " %10.4f %12.1f %10.2f %12.1f\n", s, cnt, t->secs, mbps(t),
               mbps(t) * 8 / 1000, (double)s * (double)cnt / slowest / 1e6);
    }
    summarize_streams(c);
    printf("  peak %.1f MB/s at %u B; N½ %s%.0f B (half the peak)\n", c->peak, c->peak_size,
           c->nhalf_below ? "<= " : "", c->nhalf);

    /* verified pass */
    if (o.verify) {
        c->verified = 1;
        for (unsigned i = 0; i < o.nsizes; i++) {
            uint32_t s = o.sizes[i];
            uint64_t cnt = stream_count(s, o.vvolume, 2, 64);
            if (measure(p, lv, OP_SINK, s, cnt, true, &out, &c->retries, why, sizeof why)) {
                char what[64];
                snprintf(what, sizeof what, "verified stream of %" PRIu64 " x %u B", cnt, s);
                c->verified = 0;
                cell_fail(c, lv, m, what, why);
                return;
            }
            c->vsizes++;
            c->vmsgs += out.res.msgs;
            c->vbytes += out.res.bytes;
            if (out.res.bad_bytes || out.res.msgs != cnt) {
                c->verified = 0;
                char w[600];
                snprintf(w, sizeof w,
                         "%" PRIu64 " of %" PRIu64 " messages of %u B checked, %" PRIu64
                         " bad (%" PRIu64 " bytes); first: %s",
                         out.res.msgs, cnt, s, out.res.bad_msgs, out.res.bad_bytes, out.res.text);
                cell_fail(c, lv, m, "verified pass", w);
                return;
            }
        }
        printf("  verified pass: %u sizes, %" PRIu64 " messages, %" PRIu64
               " bytes, every byte checked by node %u: OK\n",
               c->vsizes, c->vmsgs, c->vbytes, p->node);
    } else {
        printf("  verified pass: skipped (--no-verify)\n");
    }
    if (c->retries)
        printf("  HAL runs measured again after a lost frame: %u\n", c->retries);
    c->state = CELL_DONE;
}

/* Attach p's process and run every level with it; then let it go. */
static void run_mode(struct peer *p)
{
    enum pp_mode m = p->mode;
    char why[1024];
    struct pp_cmd c = {OP_ATTACH, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    struct pp_reply r;
    const char *bad = NULL;
    char badbuf[1024];
    if (peer_command(p, &c, why, sizeof why) ||
        peer_wait_reply(p, c.seq, R_DONE, 30000, &r, why, sizeof why)) {
        bad = why;
    } else if (r.rc) {
        snprintf(badbuf, sizeof badbuf, "the %s peer cannot attach to %s %s: %s", mode_name[m],
                 p->device ? "the device" : "psid at", p->socket, r.text);
        bad = badbuf;
    } else if (m == MODE_INTER && r.node == me.self) {
        snprintf(badbuf, sizeof badbuf,
                 p->device ? "--peer-device %s is node %u, this process's node too: give another "
                             "node's device"
                           : "--peer-socket %s is the psid of node %u, this process's node too: "
                             "give another node's psid socket",
                 p->socket, r.node);
        bad = badbuf;
    } else if (m == MODE_INTRA && r.node != me.self) {
        snprintf(badbuf, sizeof badbuf, "the intra-node peer attached to node %u, not %u", r.node,
                 me.self);
        bad = badbuf;
    }
    if (bad) {
        printf("\n%s: %s\n", mode_name[m], bad);
        for (int lv = 0; lv < NLEVELS; lv++)
            if (o.level[lv]) {
                cells[m][lv].state = CELL_FAILED;
                snprintf(cells[m][lv].why, sizeof cells[m][lv].why, "%s", bad);
            }
        add_failure("%s: %s", mode_name[m], bad);
        return;
    }
    p->attached = true;
    p->node = (uint16_t)r.node;
    p->port = r.port;
    run_latencies(p);
    fflush(stdout);
    if (cells[m][LVL_PORTD].state == CELL_FAILED || p->dead) {
        /* port-D's state is not recoverable after a failure (requests pending) */
        for (int lv = 0; lv < NLEVELS; lv++)
            if (o.level[lv] && cells[m][lv].state == CELL_NOT_RUN) {
                struct cell *c = &cells[m][lv];
                c->lat[0].valid = c->lat[1].valid = false; /* no half-measured cell */
                snprintf(c->why, sizeof c->why, "%s",
                         p->dead ? "the peer died" : "port-D failed before the streams");
            }
        return;
    }
    for (int lv = 0; lv < NLEVELS; lv++) {
        if (!o.level[lv])
            continue;
        run_cell(p, (enum pp_level)lv);
        fflush(stdout);
        if (cells[m][lv].state == CELL_FAILED && (lv == LVL_PORTD || p->dead))
            break; /* port-D state is not recoverable after a failure (requests pending) */
    }
}

/* Tell p to detach and exit; reap it (killed after 5 s). */
static void peer_quit(struct peer *p)
{
    if (p->pid <= 0)
        return;
    struct pp_cmd c = {OP_QUIT, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (!p->dead)
        send(p->fd, &c, sizeof c, MSG_NOSIGNAL);
    close(p->fd);
    for (int i = 0; i < 500; i++) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
            p->pid = -1;
            return;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = -1;
}

/*
 * Single-core memcpy bandwidth for size-byte messages, in MB/s: the median of reps copies,
 * copy i from source i % nsrc to destination i % ndst (nsrc = ndst = 1: the same, cache-hot
 * buffers every time; more: the footprint of a port-D stream's send buffers and posted
 * receives, as slots_for() sizes them).
 */
static double measure_memcpy(uint32_t size, unsigned nsrc, unsigned ndst, unsigned reps)
{
    uint8_t *src = bench_alloc((size_t)nsrc * size), *dst = bench_alloc((size_t)ndst * size);
    double *t = calloc(reps, sizeof(double));
    if (!src || !dst || !t)
        psp_fail_exit("out of memory");
    memset(src, 0x5a, (size_t)nsrc * size);
    memset(dst, 0xa5, (size_t)ndst * size);
    for (unsigned i = 0; i < 2 * nsrc * ndst; i++) /* warm caches and TLB */
        memcpy(dst + (size_t)(i % ndst) * size, src + (size_t)(i % nsrc) * size, size);
    for (unsigned i = 0; i < reps; i++) {
        uint8_t *d = dst + (size_t)(i % ndst) * size, *s = src + (size_t)(i % nsrc) * size;
        s[i % size] = (uint8_t)i;
        uint64_t t0 = mcp_now_ns();
        memcpy(d, s, size);
        __asm__ volatile("" : : "r"(d) : "memory");
        t[i] = secs_between(t0, mcp_now_ns());
    }
    qsort(t, reps, sizeof t[0], cmp_double);
    double med = reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
    bench_free(src, (size_t)nsrc * size);
    bench_free(dst, (size_t)ndst * size);
    free(t);
    return med > 0 ? size / med / 1e6 : 0;
}

/* The memcpy references of the intra-node runs (called before and after them: the higher
 * counts, the host's load varies). */
static void memcpy_reference(void)
{
    memcpy_reps = o.quick ? 16 : 64;
    memcpy_nsrc = slots_for(BIG_SIZE, 1);
    memcpy_ndst = slots_for(BIG_SIZE, 2);
    double hot = measure_memcpy(BIG_SIZE, 1, 1, memcpy_reps);
    double wide = measure_memcpy(BIG_SIZE, memcpy_nsrc, memcpy_ndst, memcpy_reps);
    if (hot > memcpy_mbps)
        memcpy_mbps = hot;
    if (wide > memcpy_wide_mbps)
        memcpy_wide_mbps = wide;
}

/* ---------------------------------------------------------------------------------------- */
/* Summary, targets, CSV                                                                    */
/* ---------------------------------------------------------------------------------------- */

/* A summary cell's text: the value, or n/a / failed / not run. */
static const char *cell_text(const struct cell *c, char *buf, size_t n, const char *fmt, double v,
                             bool have)
{
    switch (c->state) {
    case CELL_NA:
        return "n/a";
    case CELL_NOT_RUN:
        return "not run";
    case CELL_FAILED:
        if (!have)
            return "failed";
        break;
    case CELL_DONE:
        break;
    }
    if (!have)
        return "-";
    snprintf(buf, n, fmt, v);
    return buf;
}

#define COLW 16

/* The table-3 style summary of every cell. */
static void print_summary(void)
{
    int cols[NMODES * NLEVELS][2], nc = 0;
    for (int m = 0; m < NMODES; m++)
        for (int lv = 0; lv < NLEVELS; lv++)
            if (o.level[lv]) {
                cols[nc][0] = m;
                cols[nc][1] = lv;
                nc++;
            }
    printf("\nsummary (seed table 3 style): latency = round trip / 2, median of %" PRIu64
           " (min - max); throughput = streaming (best run), MB/s = 10^6 B/s\n",
           o.reps);
    print_padded("", 30, false);
    for (int i = 0; i < nc; i++)
        print_padded(levels[cols[i][1]].name, COLW, true);
    printf("\n");
    print_padded("", 30, false);
    for (int i = 0; i < nc; i++)
        print_padded(mode_name[cols[i][0]], COLW, true);
    printf("\n");

    enum { ROW_L4, ROW_L4R, ROW_L8, ROW_L8R, ROW_BIG, ROW_PEAK, ROW_PEAKAT, ROW_NHALF, ROW_VER };
    static const char *const label[] = {
        "latency 4 B, µs",        "  min - max",           "latency 8 B, µs",      "  min - max",
        "throughput 4 MiB, MB/s", "peak throughput, MB/s", "  at message size, B", "N½, B",
        "verified (every byte)"};
    for (int row = ROW_L4; row <= ROW_VER; row++) {
        printf("  ");
        print_padded(label[row], 28, false);
        for (int i = 0; i < nc; i++) {
            const struct cell *c = &cells[cols[i][0]][cols[i][1]];
            char buf[64];
            const char *t = "-";
            const struct lat *l = &c->lat[row >= ROW_L8 ? 1 : 0];
            switch (row) {
            case ROW_L4:
            case ROW_L8:
                t = cell_text(c, buf, sizeof buf, "%.2f", l->med, l->valid);
                break;
            case ROW_L4R:
            case ROW_L8R:
                if (l->valid) {
                    snprintf(buf, sizeof buf, "%.2f-%.2f", l->min, l->max);
                    t = buf;
                } else {
                    t = cell_text(c, buf, sizeof buf, "", 0, false);
                }
                break;
            case ROW_BIG:
                t = cell_text(c, buf, sizeof buf, "%.1f", c->big, c->big > 0);
                break;
            case ROW_PEAK:
                t = cell_text(c, buf, sizeof buf, "%.1f", c->peak, c->peak > 0);
                break;
            case ROW_PEAKAT:
                t = cell_text(c, buf, sizeof buf, "%.0f", c->peak_size, c->peak > 0);
                break;
            case ROW_NHALF:
                if (c->peak > 0) {
                    snprintf(buf, sizeof buf, "%s%.0f", c->nhalf_below ? "<=" : "", c->nhalf);
                    t = buf;
                } else {
                    t = cell_text(c, buf, sizeof buf, "", 0, false);
                }
                break;
            case ROW_VER:
                t = c->verified == 1        ? "OK"
                    : c->verified == 0      ? "FAILED"
                    : c->state == CELL_DONE ? "skipped"
                                            : cell_text(c, buf, sizeof buf, "", 0, false);
                break;
            }
            print_padded(t, COLW, true);
        }
        printf("\n");
    }
    if (memcpy_mbps > 0)
        printf("  memcpy 4 MiB, one core, MB/s: %.1f between the same two buffers, %.1f over %u "
               "sources and %u destinations as port-D's stream uses (median of %u copies, the "
               "higher of two measurements around the intra-node runs; buffers in %s)\n",
               memcpy_mbps, memcpy_wide_mbps, memcpy_nsrc, memcpy_ndst, memcpy_reps,
               o.small_pages ? "4 KiB pages" : "transparent huge pages");
    for (int m = 0; m < NMODES; m++)
        for (int lv = 0; lv < NLEVELS; lv++)
            if (o.level[lv] && cells[m][lv].state != CELL_DONE)
                printf("  %s %s: %s: %s\n", levels[lv].name, mode_name[m],
                       cells[m][lv].state == CELL_NA       ? "n/a"
                       : cells[m][lv].state == CELL_FAILED ? "failed"
                                                           : "not run",
                       cells[m][lv].why);
}

/* A target line: PASS/MISS and text, or "-" when a figure is missing. */
static void print_target(int ok, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void print_target(int ok, const char *what, const char *fmt, ...)
{
    va_list ap;
    printf("  %-4s  ", ok < 0 ? "-" : ok ? "PASS" : "MISS");
    print_padded(what, 52, false);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

/* Comparisons (port-D vs HAL, vs memcpy) and the targets, informational. */
static void print_targets(void)
{
    const struct cell *hi = &cells[MODE_INTER][LVL_HAL], *di = &cells[MODE_INTER][LVL_PORTD],
                      *dl = &cells[MODE_INTRA][LVL_PORTD];
    char miss[64];
    printf("\ncomparisons and targets (informational: not part of the exit status)\n");
    const struct over_hal *a = &over_hal[MODE_INTER][1];
    if (a->valid && hi->lat[1].valid && di->lat[1].valid) {
        snprintf(miss, sizeof miss, ", missed by %.2f µs", a->med - 1.0);
        print_target(a->med <= 1.0, "inter-node port-D 8 B latency <= HAL's + 1 µs",
                     "%+.2f µs, the median of %u paired blocks' differences%s (medians: port-D "
                     "%.2f, HAL %.2f µs)",
                     a->med, a->blocks, a->med <= 1.0 ? "" : miss, di->lat[1].med, hi->lat[1].med);
    } else {
        print_target(-1, "inter-node port-D 8 B latency <= HAL's + 1 µs", "not measured");
    }
    if (hi->big > 0 && di->big > 0) {
        double r = di->big / hi->big;
        snprintf(miss, sizeof miss, ", missed by %.1f %%", (0.9 - r) / 0.9 * 100);
        print_target(r >= 0.9, "inter-node port-D throughput >= 0.9x HAL",
                     "4 MiB: %.1f / %.1f MB/s = %.2fx%s; peak %.1f / %.1f MB/s = %.2fx", di->big,
                     hi->big, r, r >= 0.9 ? "" : miss, di->peak, hi->peak, di->peak / hi->peak);
    } else {
        print_target(-1, "inter-node port-D throughput >= 0.9x HAL", "not measured (4 MiB)");
    }
    if (dl->lat[1].valid) {
        double v = dl->lat[1].med;
        snprintf(miss, sizeof miss, ", missed by %.2f µs", v - 1.0);
        print_target(v <= 1.0, "intra-node port-D 8-byte latency <= 1 µs", "%.2f µs%s", v,
                     v <= 1.0 ? "" : miss);
    } else {
        print_target(-1, "intra-node port-D 8-byte latency <= 1 µs", "not measured");
    }
    if (dl->big > 0 && memcpy_wide_mbps > 0) {
        /* Like for like: the memcpy over the same buffers the stream uses (a fresh buffer per
         * message, as an application's messages are); the copy between the same two buffers,
         * which stay in the cache, is printed beside it. */
        double r = dl->big / memcpy_wide_mbps;
        snprintf(miss, sizeof miss, ", missed by %.1f %%", (0.8 - r) / 0.8 * 100);
        print_target(r >= 0.8, "intra-node port-D 4 MiB throughput >= 0.8x memcpy",
                     "%.1f / %.1f MB/s = %.2fx%s (memcpy over the stream's %u+%u buffers; "
                     "between the same two cached buffers: %.2fx)",
                     dl->big, memcpy_wide_mbps, r, r >= 0.8 ? "" : miss, memcpy_nsrc, memcpy_ndst,
                     dl->big / memcpy_mbps);
    } else {
        print_target(-1, "intra-node port-D 4 MiB throughput >= 0.8x memcpy", "not measured");
    }
}

/* s for a quoted CSV field: double quotes become single ones (static buffer). */
static const char *csv_text(const char *s)
{
    static char b[512];
    snprintf(b, sizeof b, "%s", s ? s : "");
    for (char *q = b; *q; q++)
        if (*q == '"')
            *q = '\'';
    return b;
}

/* One CSV row. */
static void csv_row(FILE *f, const char *level, const char *mode, const char *metric,
                    uint64_t bytes, double value, const char *unit, const char *note)
{
    fprintf(f, "%s,%s,%s,", level, mode, metric);
    if (bytes)
        fprintf(f, "%" PRIu64, bytes);
    fprintf(f, ",%.4f,%s,\"%s\"\n", value, unit, csv_text(note));
}

/* Every figure into f (--csv FILE, opened at the start): level,mode,metric,bytes,value,unit,
 * note.  0, or -1 when it cannot be written. */
static int write_csv(FILE *f, const char *path)
{
    fprintf(f, "level,mode,metric,bytes,value,unit,note\n");
    for (int m = 0; m < NMODES; m++)
        for (int lv = 0; lv < NLEVELS; lv++) {
            const struct cell *c = &cells[m][lv];
            const char *ln = levels[lv].name, *mn = mode_short[m];
            if (!o.level[lv])
                continue;
            if (c->state == CELL_NA || c->state == CELL_NOT_RUN) {
                fprintf(f, "%s,%s,%s,,,,\"%s\"\n", ln, mn, c->state == CELL_NA ? "n/a" : "not_run",
                        csv_text(c->why));
                continue;
            }
            for (int k = 0; k < 2; k++)
                if (c->lat[k].valid) {
                    csv_row(f, ln, mn, "latency_median", c->lat[k].size, c->lat[k].med, "us", NULL);
                    csv_row(f, ln, mn, "latency_mean", c->lat[k].size, c->lat[k].mean, "us", NULL);
                    csv_row(f, ln, mn, "latency_min", c->lat[k].size, c->lat[k].min, "us", NULL);
                    csv_row(f, ln, mn, "latency_max", c->lat[k].size, c->lat[k].max, "us", NULL);
                    const struct over_hal *a = &over_hal[m][k];
                    if (lv == LVL_PORTD && a->valid) {
                        char note[160];
                        snprintf(note, sizeof note,
                                 "median of %u alternating blocks' differences of medians, "
                                 "%.4f .. %.4f",
                                 a->blocks, a->min, a->max);
                        csv_row(f, ln, mn, "latency_over_hal", c->lat[k].size, a->med, "us", note);
                    }
                }
            for (unsigned i = 0; i < c->ntp; i++)
                csv_row(f, ln, mn, "throughput", c->tp[i].size, mbps(&c->tp[i]), "MB/s", NULL);
            if (c->peak > 0) {
                csv_row(f, ln, mn, "peak_throughput", c->peak_size, c->peak, "MB/s", NULL);
                csv_row(f, ln, mn, "n_half", 0, c->nhalf, "B",
                        c->nhalf_below ? "reached by the smallest size" : NULL);
            }
            if (c->verified >= 0)
                csv_row(f, ln, mn, "verified", c->vbytes, c->verified, "bool", NULL);
            if (c->state == CELL_FAILED)
                fprintf(f, "%s,%s,failed,,,,\"%s\"\n", ln, mn, csv_text(c->why));
        }
    if (memcpy_mbps > 0) {
        csv_row(f, "memcpy", "intra", "throughput", BIG_SIZE, memcpy_mbps, "MB/s",
                "one core, the same two buffers");
        csv_row(f, "memcpy", "intra", "throughput_wide", BIG_SIZE, memcpy_wide_mbps, "MB/s",
                "one core, over the buffers of port-D's stream");
    }
    int rc = fclose(f);
    if (rc)
        fprintf(stderr, PROG ": cannot write --csv %s: %s\n", path, strerror(errno));
    return rc ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Main                                                                                     */
/* ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    psp_log_init(PROG);
    psp_tool_init(PROG, usage);
    setvbuf(stdout, NULL, _IOLBF, 1 << 16);
    parse_options(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    /* this node's provider: the kernel module's device, else psid's socket */
    const char *own = pulc_dev_path() ? pulc_dev_path() : psp_setting_str("PSP_PSID_SOCKET");
    FILE *csv = NULL;
    if (o.csv && !(csv = fopen(o.csv, "w"))) {
        fprintf(stderr, PROG ": cannot write --csv %s: %s\n", o.csv, strerror(errno));
        exit(EXIT_USAGE);
    }

    /* The peers first: libpulc's attachment must not be inherited. */
    for (int m = 0; m < NMODES; m++) {
        peers[m].pid = -1;
        peers[m].fd = -1;
    }
    if (o.mode[MODE_INTER])
        peer_spawn(&peers[MODE_INTER], MODE_INTER, o.peer_socket, o.peer_device);
    if (o.mode[MODE_INTRA])
        peer_spawn(&peers[MODE_INTRA], MODE_INTRA, own, pulc_dev_path() != NULL);

    char err[512];
    if (proc_attach(err, sizeof err))
        psp_fail_exit("cannot attach to %s %s: %s", pulc_dev_path() ? "the device" : "psid at", own,
                      err);

    const struct mcp_config *cfg = &me.h->img->cfg;
    const struct pulc_area_cfg *ac = &me.h->area->cfg;
    printf(PROG ": node %u (%s %s), port %s\n", me.self, me.h->kernel ? "device" : "psid", own,
           port_text(PSP_GetPortId(me.port)));
    printf("  NIC: %s link, frame payload %u B (%u B data + %u B PULC header), window %u, send "
           "slots %u, host queue %u\n",
           me.h->area->link_kind, pulc_hal_max_payload(me.h),
           pulc_hal_max_payload(me.h) - PULC_HDR_LEN, PULC_HDR_LEN, cfg->window, cfg->send_slots,
           cfg->hostq_slots);
    printf("  area: %u fragments of %u B, %u message descriptors; PSP_LOCAL_DIRECT %s, "
           "PSP_SPIN_US %s\n",
           ac->fragments, ac->frag_size, ac->messages, psp_setting_str("PSP_LOCAL_DIRECT"),
           psp_setting_str("PSP_SPIN_US"));
    printf("  modes: inter-node %s; intra-node %s\n",
           o.mode[MODE_INTER] ? o.peer_socket : "not run (no --peer-socket)",
           o.mode[MODE_INTRA] ? "peer on the same psid" : "not run");
    printf("  streams: %u sizes %u .. %u B, %" PRIu64 " B each (%" PRIu64 " .. %" PRIu64
           " messages; more when shorter than %" PRIu64 " ms), best of %" PRIu64
           "; verified pass: %s\n",
           o.nsizes, o.sizes[0], o.sizes[o.nsizes - 1], o.volume, o.min_msgs, o.max_msgs,
           o.min_run_ms, o.stream_reps, o.verify ? "on (separate, untimed)" : "off");
    if (!o.mode[MODE_INTER])
        for (int lv = 0; lv < NLEVELS; lv++) {
            cells[MODE_INTER][lv].state = CELL_NOT_RUN;
            snprintf(cells[MODE_INTER][lv].why, sizeof cells[MODE_INTER][lv].why,
                     o.mode_given ? "not asked for (--mode)"
                                  : "no --peer-socket (another node's psid socket) given");
        }
    if (!o.mode[MODE_INTRA])
        for (int lv = 0; lv < NLEVELS; lv++) {
            cells[MODE_INTRA][lv].state = CELL_NOT_RUN;
            snprintf(cells[MODE_INTRA][lv].why, sizeof cells[MODE_INTRA][lv].why,
                     "not asked for (--mode)");
        }
    for (int m = 0; m < NMODES; m++)
        for (int lv = 0; lv < NLEVELS; lv++)
            cells[m][lv].verified = -1;
    fflush(stdout);

    for (int m = 0; m < NMODES; m++) {
        if (!o.mode[m])
            continue;
        if (m == MODE_INTRA)
            memcpy_reference();
        run_mode(&peers[m]);
        peer_quit(&peers[m]);
        if (m == MODE_INTRA)
            memcpy_reference();
    }

    print_summary();
    print_targets();
    if (csv && write_csv(csv, o.csv))
        add_failure("cannot write --csv %s", o.csv);
    PSP_Finalize();

    printf("\n");
    if (failures) {
        printf(PROG ": FAILED (%u):\n", failures);
        for (unsigned i = 0; i < failures && i < 8; i++)
            printf("  - %s\n", fail_why[i]);
    } else {
        printf(PROG ": all measurements ran and every check passed\n");
    }
    fflush(stdout);
    return failures ? EXIT_FAIL : EXIT_OK;
}
