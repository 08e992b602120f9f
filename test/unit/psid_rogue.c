/*
 * psid_rogue.c — a rogue psid for tests: sends daemon messages no psid may act on.
 *
 *     psid_rogue --nodes FILE --node ID --to A[,B...] --count N [--seed S] [--wait-ms M]
 *
 * Run in place of a stopped psid (in its network namespace), it opens the daemon link as node
 * ID (dlink.h: no faults, peer timeout 5000 ms) and sends N messages to each target node:
 * random types 0..15 (unknown ones too), random lengths 0..2000 and random bytes, and valid
 * messages of dmsg.h made invalid (wrong lengths; SPAWN with argc 0, counts that do not match
 * the strings, a string without its NUL; OUTPUT on stream 7; SIGNAL with sig 999 or pid 0;
 * ORPHANS with extra bytes).  psid_dmsg_check rejects every one before it is sent: a candidate
 * it accepts is replaced by another (counted), so nothing sent is well formed.  Then the link
 * runs until the firmware has every frame acknowledged, or --wait-ms (10000) passes.  What the
 * targets send (ALIVE) is dropped unanswered.
 *
 * Prints "rogue: sent N messages to node A, N messages to node B ..." and "rogue: delivered";
 * exits 0, or 1 if not everything was acknowledged (2: bad command line).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "dlink.h"
#include "dmsg.h"
#include "fault.h"
#include "mcp_env.h"
#include "nodes.h"
#include "settings.h"
#include "tool.h"

#define PROG      "psid_rogue"
#define MAX_LEN   2000u
#define BUF_BYTES (MAX_LEN + 4096u)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s --nodes FILE --node ID --to A[,B...] --count N [--seed S] "
            "[--wait-ms M]\n"
            "Sends N malformed daemon messages to each target psid as node ID (whose psid is\n"
            "stopped), waits until all are acknowledged; exit 0, or 1 if they were not.\n",
            PROG);
}

static uint32_t below(uint64_t *rs, uint32_t n)
{
    return n ? (uint32_t)(mcp_rand64(rs) % n) : 0;
}

static void fill_random(uint64_t *rs, void *buf, uint32_t len)
{
    uint8_t *b = buf;
    for (uint32_t i = 0; i < len; i++)
        b[i] = (uint8_t)(mcp_rand64(rs) >> 24);
}

/* A valid SPAWN (cwd "/", argv, env) into buf; returns its length. */
static uint32_t make_spawn(uint64_t *rs, uint8_t *buf)
{
    struct psid_m_spawn s;
    fill_random(rs, &s, sizeof s);
    s.b.flags = below(rs, PSPC_SPAWN_FLAGS + 1);
    s.b.argc = 1 + below(rs, 3);
    s.b.envc = below(rs, 3);
    uint32_t off = sizeof s;
    static const char *const words[] = {"/", "/bin/true", "true", "PATH=/bin", "X=1", "arg"};
    for (uint32_t i = 0; i < 1 + s.b.argc + s.b.envc; i++) {
        const char *w = words[below(rs, 6)];
        size_t n = strlen(w) + 1;
        memcpy(buf + off, w, n);
        off += (uint32_t)n;
    }
    s.b.strings_len = off - (uint32_t)sizeof s;
    memcpy(buf, &s, sizeof s);
    return off;
}

/* A malformed SPAWN; returns its length. */
static uint32_t bad_spawn(uint64_t *rs, uint8_t *buf)
{
    uint32_t len = make_spawn(rs, buf);
    struct psid_m_spawn s;
    memcpy(&s, buf, sizeof s);
    switch (below(rs, 6)) {
    case 0:
        s.b.argc = 0;
        break;
    case 1: /* more strings counted than there are */
        s.b.argc += 1 + below(rs, 3);
        break;
    case 2:
        s.b.envc += 1 + below(rs, 3);
        break;
    case 3: /* the last string without its NUL */
        buf[len - 1] = 'x';
        break;
    case 4: /* strings_len disagrees with the length */
        s.b.strings_len += 1 + below(rs, 100);
        break;
    default: /* one more string than counted */
        memcpy(buf + len, "extra", 6);
        len += 6;
        s.b.strings_len += 6;
        break;
    }
    memcpy(buf, &s, sizeof s);
    return len;
}

/*
 * A candidate message into buf: its type in *type, channel in *chan; returns its length.
 * Most of them are malformed; psid_dmsg_check decides.
 */
static uint32_t candidate(uint64_t *rs, uint8_t *buf, uint16_t *type, enum psid_chan *chan)
{
    *chan = below(rs, 2) ? PSID_CHAN_BULK : PSID_CHAN_URGENT;
    switch (below(rs, 10)) {
    case 0: { /* a fixed struct with a wrong length */
        static const struct {
            uint16_t type;
            uint32_t size;
        } fixed[] = {{PSID_M_ALIVE, sizeof(struct psid_m_alive)},
                     {PSID_M_REPLY, sizeof(struct psid_m_reply)},
                     {PSID_M_EXIT, sizeof(struct psid_m_exit)}};
        unsigned i = below(rs, 3);
        *type = fixed[i].type;
        uint32_t len = below(rs, 2) ? below(rs, fixed[i].size) : fixed[i].size + 1 + below(rs, 64);
        fill_random(rs, buf, len);
        return len;
    }
    case 1:
        *type = PSID_M_SPAWN;
        return bad_spawn(rs, buf);
    case 2: { /* OUTPUT on stream 7 */
        struct psid_m_task t;
        fill_random(rs, &t, sizeof t);
        t.pid = (int32_t)(1 + below(rs, 100000));
        t.stream = 7;
        memcpy(buf, &t, sizeof t);
        uint32_t n = below(rs, 200);
        memset(buf + sizeof t, 'o', n);
        *type = PSID_M_OUTPUT;
        return (uint32_t)sizeof t + n;
    }
    case 3: { /* SIGNAL with sig 999 or pid 0 */
        struct psid_m_signal s;
        fill_random(rs, &s, sizeof s);
        if (below(rs, 2)) {
            s.sig = 999;
            s.pid = (int32_t)(1 + below(rs, 100000));
        } else {
            s.pid = 0;
            s.sig = (int32_t)below(rs, 65);
        }
        memcpy(buf, &s, sizeof s);
        *type = below(rs, 2) ? PSID_M_SIGNAL : PSID_M_NOTIFY;
        return sizeof s;
    }
    case 4: { /* ORPHANS with extra bytes */
        uint32_t len = (uint32_t)sizeof(struct psid_m_orphans) + 1 + below(rs, 64);
        fill_random(rs, buf, len);
        *type = PSID_M_ORPHANS;
        return len;
    }
    default: /* anything: type 0..15, 0..2000 random bytes */
        *type = (uint16_t)below(rs, 16);
        uint32_t len = below(rs, MAX_LEN + 1);
        fill_random(rs, buf, len);
        return len;
    }
}

/* What the targets send: dropped, unanswered. */
static void drop(void *arg, uint16_t src, uint16_t type, const void *data, uint32_t len)
{
    (void)src;
    (void)type;
    (void)data;
    (void)len;
    (*(uint64_t *)arg)++;
}

int main(int argc, char **argv)
{
    psp_tool_init(PROG, usage);
    static const struct option lo[] = {
        {"nodes", required_argument, NULL, 'f'}, {"node", required_argument, NULL, 'n'},
        {"to", required_argument, NULL, 't'},    {"count", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 's'},  {"wait-ms", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    const char *nodes_file = NULL;
    long node = -1;
    uint16_t to[64];
    unsigned nto = 0;
    uint64_t count = 0, seed = 0, wait_ms = 10000;
    int have_count = 0, have_seed = 0;
    int c;
    while ((c = getopt_long(argc, argv, "f:n:t:c:s:w:h", lo, NULL)) != -1) {
        switch (c) {
        case 'f':
            nodes_file = optarg;
            break;
        case 'n':
            node = (long)psp_opt_u64("node", optarg, 0, 65534);
            break;
        case 't': {
            char *list = strdup(optarg), *save = NULL;
            if (!list)
                psp_fail_exit("out of memory");
            for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                if (nto == sizeof to / sizeof to[0])
                    psp_usage_error("--to: more than %zu nodes", sizeof to / sizeof to[0]);
                to[nto++] = (uint16_t)psp_opt_u64("to", w, 0, 65534);
            }
            free(list);
            break;
        }
        case 'c':
            count = psp_opt_u64("count", optarg, 1, 1000000);
            have_count = 1;
            break;
        case 's':
            seed = psp_opt_u64("seed", optarg, 0, UINT64_MAX);
            have_seed = 1;
            break;
        case 'w':
            wait_ms = psp_opt_u64("wait-ms", optarg, 1, 3600000);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            psp_usage_error("unknown option");
        }
    }
    if (optind < argc)
        psp_usage_error("unexpected argument '%s'", argv[optind]);
    if (!nodes_file || node < 0 || !nto || !have_count)
        psp_usage_error("--nodes, --node, --to and --count are required");

    char err[512] = "";
    uint64_t port;
    if (psp_setting_u64("PSP_UDP_PORT", 1, 65534, &port, err, sizeof err))
        psp_usage_error("%s", err);
    static struct psp_nodes nodes;
    if (psp_nodes_load(nodes_file, (uint16_t)port, &nodes, err, sizeof err))
        psp_fail_exit("nodes file %s: %s", nodes_file, err);
    if (node >= nodes.count || !nodes.node[node].present)
        psp_usage_error("--node %ld is not in the nodes file %s", node, nodes_file);
    for (unsigned i = 0; i < nto; i++)
        if (to[i] == node || to[i] >= nodes.count || !nodes.node[to[i]].present)
            psp_usage_error("--to %u: not another node of the nodes file %s", to[i], nodes_file);
    if (!have_seed && getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = mcp_now_ns();

    struct mcp_fault_cfg none;
    memset(&none, 0, sizeof none);
    struct psid_dlink *dl = psid_dlink_open((uint16_t)node, &nodes, &none, 5000, err, sizeof err);
    if (!dl)
        psp_fail_exit("%s", err);

    uint64_t rs = seed ? seed : 1;
    static uint8_t buf[BUF_BYTES];
    uint64_t replaced = 0, bytes = 0;
    for (unsigned i = 0; i < nto; i++) {
        for (uint64_t k = 0; k < count; k++) {
            uint16_t type;
            enum psid_chan chan;
            uint32_t len;
            /* Only what psid_dmsg_check rejects goes out. */
            for (;;) {
                len = candidate(&rs, buf, &type, &chan);
                if (psid_dmsg_check(type, buf, len) != 0)
                    break;
                replaced++;
            }
            if (psid_dmsg_check(type, buf, len) == 0) /* cannot happen: the loop above */
                psp_fail_exit("internal error: a well-formed message of type %u", type);
            int rc = psid_dlink_send(dl, to[i], chan, type, buf, len, NULL, 0);
            if (rc)
                psp_fail_exit("sending to node %u: %s", to[i], strerror(-rc));
            bytes += len;
        }
    }

    uint64_t received = 0;
    uint64_t end = mcp_now_ns() + wait_ms * 1000000u;
    while (psid_dlink_busy(dl) && mcp_now_ns() < end) {
        if (psid_dlink_run(dl, mcp_now_ns(), drop, &received) == 0) {
            struct pollfd p = {.fd = psid_dlink_fd(dl), .events = POLLIN};
            (void)poll(&p, 1, 1);
        }
    }
    /* A last pass acknowledges what came in meanwhile (nothing is answered). */
    psid_dlink_run(dl, mcp_now_ns(), drop, &received);

    printf("rogue: sent %" PRIu64 " messages to node %u", count, to[0]);
    for (unsigned i = 1; i < nto; i++)
        printf(", %" PRIu64 " messages to node %u", count, to[i]);
    printf(" (%" PRIu64 " bytes, seed %" PRIu64 "; %" PRIu64
           " candidates psid_dmsg_check accepted were replaced; %" PRIu64 " received, dropped)\n",
           bytes, seed, replaced, received);
    const struct psid_dlink_stats *st = psid_dlink_stats(dl);
    int busy = psid_dlink_busy(dl);
    uint64_t failed = st->send_failed;
    psid_dlink_close(dl);
    if (busy)
        psp_fail_exit("not everything was acknowledged within %" PRIu64 " ms", wait_ms);
    if (failed)
        psp_fail_exit("%" PRIu64 " frames failed (a target declared dead)", failed);
    printf("rogue: delivered\n");
    return 0;
}
