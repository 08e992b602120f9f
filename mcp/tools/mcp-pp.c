/*
 * mcp-pp — firmware-level benchmark and verification tool.
 *
 * Two processes, one per node: `mcp-pp --server` on one node and the client on another.  Each
 * process owns a NIC image (malloc'd) and a link, and runs the firmware itself (host-driven
 * executor: mcp_poll() in a busy loop while it waits).  The client drives a run of tests:
 *
 *   pingpong  firmware round trips per message size (latency = round trip / 2)
 *   stream    a volume of messages client -> server, confirmed by the server with byte count and
 *             CRC-32C of the whole stream
 *   verify    the same with every byte checked by the server: each message carries its stream
 *             offset and number and content derived from them
 *   raw       the baseline: the same exchanges over plain UDP sockets (port + 1)
 *
 * then prints a side-by-side summary and both nodes' NIC counters (the server sends its own).
 *
 * Between the two processes, the tests are coordinated by control messages sent through the
 * firmware itself (reliable and ordered): a control message is split into chunks of a 16-byte
 * header plus data, so it fits any frame size.  Everything on the wire is little-endian.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "crc32c.h"
#include "link.h"
#include "log.h"
#include "mcp.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "nodes.h"
#include "settings.h"
#include "tool.h"

#define PROG "mcp-pp"

#define EXIT_OK    0
#define EXIT_FAIL  PSP_EXIT_FAIL  /* a test failed, the peer did not answer, the run timed out */
#define EXIT_USAGE PSP_EXIT_USAGE /* bad command line or settings */

#define T_PINGPONG 1u
#define T_STREAM   2u
#define T_VERIFY   4u
#define T_RAW      8u
#define T_ALL      (T_PINGPONG | T_STREAM | T_VERIFY | T_RAW)

#define MAX_SIZES   32
#define HELLO_TRIES 4 /* first message: attempts on -ETIMEDOUT (peer not up yet) */

/* ---------------------------------------------------------------------------------------- */
/* Control messages                                                                         */
/* ---------------------------------------------------------------------------------------- */

#define PP_VERSION   1u
#define CTL_MAGIC    0x4d505043u /* "CPPM" */
#define CTL_HDR      16u
#define CTL_MAX      8192u
#define MIN_PAYLOAD  (CTL_HDR + 16u)
#define PING_MIN     8u
#define VERIFY_HDR   16u
#define PATTERN_SPAN 65536u

enum ctl_type {
    CTL_HELLO = 1,  /* client -> server: start a run */
    CTL_WELCOME,    /* server -> client: its configuration */
    CTL_PP_BEGIN,   /* client -> server: echo the next `count` messages */
    CTL_STREAM,     /* client -> server: a stream of `bytes` in `msgs` messages follows */
    CTL_STREAM_RES, /* server -> client: what arrived */
    CTL_RAW_BEGIN,  /* client -> server: open the raw UDP socket and serve the baseline */
    CTL_RAW_READY,  /* server -> client: raw socket ready (or why not) */
    CTL_RAW_END,    /* client -> server: baseline done, close the raw socket */
    CTL_FINISH,     /* client -> server: tests done, send your counters */
    CTL_FINISH_RES, /* server -> client: counters and the server's verdict */
    CTL_BYE,        /* client -> server: the run is over */
    CTL_TYPE_MAX
};

static const char *ctl_name(unsigned t)
{
    static const char *const names[] = {"?",       "HELLO",      "WELCOME",    "PP_BEGIN",
                                        "STREAM",  "STREAM_RES", "RAW_BEGIN",  "RAW_READY",
                                        "RAW_END", "FINISH",     "FINISH_RES", "BYE"};
    return t < CTL_TYPE_MAX ? names[t] : "?";
}

static void put64(uint8_t *p, uint64_t v)
{
    mcp_put_le32(p, (uint32_t)v);
    mcp_put_le32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)mcp_get_le32(p) | ((uint64_t)mcp_get_le32(p + 4) << 32);
}

/* A control message being written. */
struct wbuf {
    uint8_t b[CTL_MAX];
    uint32_t n;
};

static void w32(struct wbuf *w, uint32_t v)
{
    if (w->n + 4 <= CTL_MAX)
        mcp_put_le32(w->b + w->n, v);
    w->n += 4;
}

static void w64(struct wbuf *w, uint64_t v)
{
    if (w->n + 8 <= CTL_MAX)
        put64(w->b + w->n, v);
    w->n += 8;
}

static void wstr(struct wbuf *w, const char *s)
{
    size_t len = strlen(s);
    if (len > 1024)
        len = 1024;
    w32(w, (uint32_t)len);
    if (w->n + len <= CTL_MAX)
        memcpy(w->b + w->n, s, len);
    w->n += (uint32_t)len;
}

/* A control message being read; `bad` is set when it is shorter than its fields. */
struct rbuf {
    const uint8_t *b;
    uint32_t n, pos;
    bool bad;
};

static uint32_t r32(struct rbuf *r)
{
    if (r->pos + 4 > r->n) {
        r->bad = true;
        return 0;
    }
    r->pos += 4;
    return mcp_get_le32(r->b + r->pos - 4);
}

static uint64_t r64(struct rbuf *r)
{
    if (r->pos + 8 > r->n) {
        r->bad = true;
        return 0;
    }
    r->pos += 8;
    return get64(r->b + r->pos - 8);
}

static void rstr(struct rbuf *r, char *out, size_t cap)
{
    uint32_t len = r32(r);
    if (r->bad || r->pos + len > r->n) {
        r->bad = true;
        out[0] = '\0';
        return;
    }
    size_t c = len < cap - 1 ? len : cap - 1;
    memcpy(out, r->b + r->pos, c);
    out[c] = '\0';
    r->pos += len;
}

/* ---------------------------------------------------------------------------------------- */
/* Deterministic content                                                                    */
/* ---------------------------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Word i of a verify message's content: distinct for every i, cheap to compute. */
static inline uint64_t vword(uint64_t seed, uint64_t i)
{
    uint64_t v = seed + i * 0x9e3779b97f4a7c15ull;
    return htole64(v ^ (v >> 29));
}

static inline uint64_t vseed(uint64_t off, uint64_t msgno)
{
    return mix64(off ^ mix64(msgno + 0x5851f42d4c957f2dull));
}

/*
 * A verify message: [stream offset u64][message number u64][content], the header cut short if
 * the message is shorter than 16 bytes; content word i = vword(vseed(off, msgno), i).
 */
static void verify_fill(uint8_t *p, uint32_t len, uint64_t off, uint64_t msgno)
{
    uint8_t hdr[VERIFY_HDR];
    put64(hdr, off);
    put64(hdr + 8, msgno);
    memcpy(p, hdr, len < VERIFY_HDR ? len : VERIFY_HDR);
    if (len <= VERIFY_HDR)
        return;
    uint64_t seed = vseed(off, msgno);
    uint8_t *q = p + VERIFY_HDR;
    uint32_t body = len - VERIFY_HDR, words = body / 8;
    for (uint32_t i = 0; i < words; i++) {
        uint64_t w = vword(seed, i);
        memcpy(q + 8 * (size_t)i, &w, 8);
    }
    if (body % 8) {
        uint64_t w = vword(seed, words);
        memcpy(q + 8 * (size_t)words, &w, body % 8);
    }
}

static unsigned diff_bytes(uint64_t a, uint64_t b, unsigned n)
{
    unsigned d = 0;
    uint64_t x = a ^ b;
    for (unsigned i = 0; i < n; i++)
        d += ((x >> (8 * i)) & 0xff) != 0;
    return d;
}

/* Number of bytes of p (len bytes) that differ from message (off, msgno). */
static uint64_t verify_check(const uint8_t *p, uint32_t len, uint64_t off, uint64_t msgno)
{
    uint8_t hdr[VERIFY_HDR];
    uint64_t bad = 0;
    put64(hdr, off);
    put64(hdr + 8, msgno);
    uint32_t h = len < VERIFY_HDR ? len : VERIFY_HDR;
    for (uint32_t i = 0; i < h; i++)
        bad += p[i] != hdr[i];
    if (len <= VERIFY_HDR)
        return bad;
    uint64_t seed = vseed(off, msgno);
    const uint8_t *q = p + VERIFY_HDR;
    uint32_t body = len - VERIFY_HDR, words = body / 8;
    for (uint32_t i = 0; i < words; i++) {
        uint64_t got, want = vword(seed, i);
        memcpy(&got, q + 8 * (size_t)i, 8);
        if (got != want)
            bad += diff_bytes(got, want, 8);
    }
    if (body % 8) {
        uint64_t got = 0, want = vword(seed, words), mask = (1ull << (8 * (body % 8))) - 1;
        memcpy(&got, q + 8 * (size_t)words, body % 8);
        bad += diff_bytes(got & mask, want & mask, body % 8);
    }
    return bad;
}

/* The stream (not verify) test copies message k from pattern + stream_pos(k). */
static inline uint32_t stream_pos(uint64_t msgno)
{
    return (uint32_t)((msgno * 4099u) % PATTERN_SPAN);
}

static uint8_t *make_pattern(uint32_t msg_size)
{
    size_t n = PATTERN_SPAN + msg_size + 8;
    uint8_t *p = malloc(n);
    if (!p)
        return NULL;
    uint64_t s = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = mix64(s += 0x9e3779b97f4a7c15ull);
        memcpy(p + i, &w, n - i < 8 ? n - i : 8);
    }
    return p;
}

/* ---------------------------------------------------------------------------------------- */
/* Options                                                                                  */
/* ---------------------------------------------------------------------------------------- */

struct opts {
    bool server, forever, counters;
    long node, peer; /* -1: default */
    const char *nodes_file, *link, *ifname;
    unsigned tests;
    uint32_t sizes[MAX_SIZES];
    unsigned nsizes;
    uint64_t iters, warmup, bytes, msg_size, timeout_s;
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: " PROG " [options]              client: run the tests against a server\n"
            "       " PROG " --server [options]     server: serve one client run (or many)\n"
            "\n"
            "Benchmark and verify the psport firmware (RDP over a udp or eth link) between two\n"
            "nodes, against a plain UDP baseline.  Run the server on one node and the client on\n"
            "another, e.g. with test/cluster/psport-cluster:\n"
            "  psport-cluster exec 1 " PROG " --server -n 1 -N nodes.conf &\n"
            "  psport-cluster exec 0 " PROG " -n 0 -N nodes.conf\n"
            "\n"
            "Options:\n"
            "  -n, --node ID        this node's id in the nodes file (default: 0 for the client,\n"
            "                       1 for the server)\n"
            "  -N, --nodes FILE     nodes file (default: $PSP_NODES_FILE)\n"
            "  -p, --peer ID        client: the server's node (default: the other node);\n"
            "                       server: accept clients of this node only (default: any)\n"
            "  -l, --link KIND      udp or eth (default: $PSP_LINK, udp)\n"
            "  -i, --ifname IF      eth: interface (default: $PSP_LINK_IF, or the nodes file)\n"
            "      --server         act as the server\n"
            "      --forever        server: serve client runs until killed\n"
            "      --test LIST      tests to run, comma separated: pingpong,stream,verify,raw\n"
            "                       or all (default: all)\n"
            "      --sizes LIST     ping-pong message sizes, bytes >= 8 (default: 8,64,512,4096)\n"
            "      --iters N        ping-pong iterations per size (default: 1000)\n"
            "      --warmup N       ping-pong warm-up iterations per size (default: iters/10,\n"
            "                       at most 100)\n"
            "      --bytes N        stream volume, with k/m/g suffix (default: 256m)\n"
            "      --msg-size N     stream message size (default: the largest payload)\n"
            "      --loss P         drop probability on the firmware link (PSP_LINK_LOSS)\n"
            "      --dup P          duplication probability (PSP_LINK_DUP)\n"
            "      --corrupt P      corruption probability (PSP_LINK_CORRUPT)\n"
            "      --seed S         fault injection seed (PSP_LINK_SEED)\n"
            "      --window N       RDP send window, 1..64 (PSP_WINDOW)\n"
            "      --frame-size N   payload bytes per frame (PSP_FRAME_SIZE)\n"
            "      --counters       print both nodes' NIC counters at the end (default)\n"
            "      --no-counters    do not print them\n"
            "      --timeout SEC    give up if the run does not finish in SEC seconds\n"
            "                       (default: 600; 0 = never; server: per run)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Faults apply to the firmware link only, never to the raw UDP baseline, which uses\n"
            "the nodes' addresses with port + 1.  Settings: PSP_* environment variables (see\n"
            "psinfo -c), e.g. PSP_PEER_TIMEOUT_MS, PSP_RTO_US.\n"
            "Exit status: 0 all tests passed, 1 a test or the run failed, 2 usage or settings\n"
            "error.\n");
}

/* A settings/configuration error: message, no usage, exit 2. */
static void config_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void config_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    psp_tool_vmessage(fmt, ap);
    va_end(ap);
    exit(EXIT_USAGE);
}

/* A probability for a PSP_LINK_* setting: checked here, handed on through the environment. */
static void opt_prob(const char *name, const char *text, const char *env)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= 0.0 && v <= 1.0))
        psp_usage_error("--%s: '%s' is not a probability in 0..1 (e.g. 0.05)", name, text);
    setenv(env, text, 1);
}

static unsigned parse_tests(const char *text)
{
    unsigned t = 0;
    char *copy = strdup(text), *save = NULL;
    if (!copy)
        psp_fail_exit("out of memory");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "pingpong"))
            t |= T_PINGPONG;
        else if (!strcmp(tok, "stream"))
            t |= T_STREAM;
        else if (!strcmp(tok, "verify"))
            t |= T_VERIFY;
        else if (!strcmp(tok, "raw"))
            t |= T_RAW;
        else if (!strcmp(tok, "all"))
            t |= T_ALL;
        else
            psp_usage_error("--test: unknown test '%s' (pingpong, stream, verify, raw, all)", tok);
    }
    free(copy);
    if (!t)
        psp_usage_error("--test: no test named in '%s'", text);
    return t;
}

static void parse_sizes(struct opts *o, const char *text)
{
    char *copy = strdup(text), *save = NULL;
    if (!copy)
        psp_fail_exit("out of memory");
    o->nsizes = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES)
            psp_usage_error("--sizes: at most %d sizes", MAX_SIZES);
        uint64_t v;
        if (psp_parse_u64(tok, PING_MIN, 65535, &v))
            psp_usage_error("--sizes: '%s' is not a size in %u..65535 bytes (a ping carries its "
                            "8-byte iteration stamp)",
                            tok, PING_MIN);
        o->sizes[o->nsizes++] = (uint32_t)v;
    }
    free(copy);
    if (!o->nsizes)
        psp_usage_error("--sizes: no size in '%s'", text);
}

static void parse_options(struct opts *o, int argc, char **argv)
{
    enum {
        O_SERVER = 256,
        O_FOREVER,
        O_TEST,
        O_SIZES,
        O_ITERS,
        O_WARMUP,
        O_BYTES,
        O_MSGSIZE,
        O_LOSS,
        O_DUP,
        O_CORRUPT,
        O_SEED,
        O_WINDOW,
        O_FRAME,
        O_COUNTERS,
        O_NOCOUNTERS,
        O_TIMEOUT,
    };
    static const struct option lo[] = {
        {"node", required_argument, NULL, 'n'},
        {"nodes", required_argument, NULL, 'N'},
        {"peer", required_argument, NULL, 'p'},
        {"link", required_argument, NULL, 'l'},
        {"ifname", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {"server", no_argument, NULL, O_SERVER},
        {"forever", no_argument, NULL, O_FOREVER},
        {"test", required_argument, NULL, O_TEST},
        {"sizes", required_argument, NULL, O_SIZES},
        {"iters", required_argument, NULL, O_ITERS},
        {"warmup", required_argument, NULL, O_WARMUP},
        {"bytes", required_argument, NULL, O_BYTES},
        {"msg-size", required_argument, NULL, O_MSGSIZE},
        {"loss", required_argument, NULL, O_LOSS},
        {"dup", required_argument, NULL, O_DUP},
        {"corrupt", required_argument, NULL, O_CORRUPT},
        {"seed", required_argument, NULL, O_SEED},
        {"window", required_argument, NULL, O_WINDOW},
        {"frame-size", required_argument, NULL, O_FRAME},
        {"counters", no_argument, NULL, O_COUNTERS},
        {"no-counters", no_argument, NULL, O_NOCOUNTERS},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {NULL, 0, NULL, 0},
    };
    static const uint32_t default_sizes[] = {8, 64, 512, 4096};
    bool warmup_set = false;
    int c;

    memset(o, 0, sizeof(*o));
    o->node = o->peer = -1;
    o->counters = true;
    o->tests = T_ALL;
    memcpy(o->sizes, default_sizes, sizeof(default_sizes));
    o->nsizes = 4;
    o->iters = 1000;
    o->bytes = 256ull << 20;
    o->timeout_s = 600;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":n:N:p:l:i:h", lo, NULL)) != -1) {
        char buf[32];
        switch (c) {
        case 'n':
            o->node = (long)psp_opt_u64("node", optarg, 0, PSP_NODES_MAX - 1);
            break;
        case 'N':
            o->nodes_file = optarg;
            break;
        case 'p':
            o->peer = (long)psp_opt_u64("peer", optarg, 0, PSP_NODES_MAX - 1);
            break;
        case 'l':
            if (strcmp(optarg, "udp") && strcmp(optarg, "eth"))
                psp_usage_error("--link: unknown link kind '%s': use udp or eth", optarg);
            o->link = optarg;
            break;
        case 'i':
            o->ifname = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(EXIT_OK);
        case O_SERVER:
            o->server = true;
            break;
        case O_FOREVER:
            o->forever = true;
            break;
        case O_TEST:
            o->tests = parse_tests(optarg);
            break;
        case O_SIZES:
            parse_sizes(o, optarg);
            break;
        case O_ITERS:
            o->iters = psp_opt_u64("iters", optarg, 1, 100000000);
            break;
        case O_WARMUP:
            o->warmup = psp_opt_u64("warmup", optarg, 0, 100000000);
            warmup_set = true;
            break;
        case O_BYTES:
            o->bytes = psp_opt_u64("bytes", optarg, 1, 1ull << 50);
            break;
        case O_MSGSIZE:
            o->msg_size = psp_opt_u64("msg-size", optarg, 1, 65535);
            break;
        case O_LOSS:
            opt_prob("loss", optarg, "PSP_LINK_LOSS");
            break;
        case O_DUP:
            opt_prob("dup", optarg, "PSP_LINK_DUP");
            break;
        case O_CORRUPT:
            opt_prob("corrupt", optarg, "PSP_LINK_CORRUPT");
            break;
        case O_SEED:
            snprintf(buf, sizeof buf, "%" PRIu64, psp_opt_u64("seed", optarg, 0, UINT64_MAX));
            setenv("PSP_LINK_SEED", buf, 1);
            break;
        case O_WINDOW:
            snprintf(buf, sizeof buf, "%" PRIu64, psp_opt_u64("window", optarg, 1, MCP_MAX_WINDOW));
            setenv("PSP_WINDOW", buf, 1);
            break;
        case O_FRAME:
            snprintf(buf, sizeof buf, "%" PRIu64,
                     psp_opt_u64("frame-size", optarg, 64, 65535 - MCP_WIRE_HDR));
            setenv("PSP_FRAME_SIZE", buf, 1);
            break;
        case O_COUNTERS:
            o->counters = true;
            break;
        case O_NOCOUNTERS:
            o->counters = false;
            break;
        case O_TIMEOUT:
            o->timeout_s = psp_opt_u64("timeout", optarg, 0, 86400 * 365);
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
    if (o->forever && !o->server)
        psp_usage_error("--forever is a server option: add --server");
    if (!warmup_set)
        o->warmup = o->iters / 10 < 100 ? o->iters / 10 : 100;
}

/* ---------------------------------------------------------------------------------------- */
/* The NIC this process runs                                                                */
/* ---------------------------------------------------------------------------------------- */

/*
 * Co-scheduling for busy waiters (see DESIGN.md): spin while there is work or for SPIN_NS after
 * the last work, then yield the CPU at every further idle poll, so a peer process that shares
 * this core (two nodes on a 2-core machine, or other load) gets to run at once instead of after
 * our time slice; after YIELD_NS of idleness (nothing to do for a long while: a server waiting
 * for its next client), sleep SLEEP_NS per poll.  Latency paths shorter than SPIN_NS never yield.
 */
#define SPIN_NS  50000u
#define YIELD_NS 50000000u
#define SLEEP_NS 200000u

struct idle {
    uint64_t since; /* first idle poll of the current idle period, 0 after work */
    uint64_t yields;
};

static inline void idle_note(struct idle *w, bool work, uint64_t now)
{
    if (work) {
        w->since = 0;
    } else if (!w->since) {
        w->since = now;
    } else if (now - w->since > YIELD_NS) {
        struct timespec ts = {0, SLEEP_NS};
        nanosleep(&ts, NULL);
    } else if (now - w->since > SPIN_NS) {
        sched_yield();
        w->yields++;
    }
}

struct fw {
    struct mcp_image *img;
    struct lanai_link *link;
    struct mcp_nic nic;
    unsigned ctx;
    uint32_t max_payload;
    uint16_t self, peer;
    bool server;
    uint64_t deadline_ns; /* 0: none */
    const char *phase;    /* what the run is doing (for the timeout message) */
    uint64_t timeout_s;
    int err; /* sticky: first failure (negative errno; -ETIME = deadline) */
    uint16_t err_node;
    uint32_t cookie;
    /* control message reassembly */
    uint8_t ctl[CTL_MAX];
    uint32_t ctl_have, ctl_total;
    uint16_t ctl_type;
    uint16_t ctl_chunk;
    bool ctl_open;
    uint64_t stray; /* messages that were not what the protocol expected */
    struct idle idle;
};

struct setup {
    struct psp_nodes *nodes;
    const char *link_kind;
    const char *ifname;
    struct mcp_fault_cfg fault;
    struct mcp_config cfg;
    uint16_t node;
};

/*
 * One firmware pass, then the error queue and the deadline.  Returns 0 or the sticky error.
 * The server only counts errors for its current client (older connections may fail late).
 */
static int fw_pump(struct fw *f)
{
    uint64_t now = mcp_now_ns();
    struct mcp_send_error e;

    idle_note(&f->idle, mcp_poll(&f->nic, now) > 0, now);
    while (mcp_errq_pop(f->img, f->ctx, &e)) {
        if (f->server && e.dst != f->peer)
            continue;
        if (!f->err) {
            f->err = e.error ? e.error : -EIO;
            f->err_node = e.dst;
        }
    }
    if (!f->err && f->deadline_ns && now > f->deadline_ns)
        f->err = -ETIME;
    return f->err;
}

/* Text for the sticky error. */
static void fw_err_text(const struct fw *f, char *buf, size_t n)
{
    uint32_t pt = f->img->cfg.peer_timeout_ms;
    switch (f->err) {
    case -ETIMEDOUT:
        if (f->server)
            snprintf(buf, n,
                     "node %u (the client) did not answer for %u ms (PSP_PEER_TIMEOUT_MS): the "
                     "client is gone",
                     f->err_node, pt);
        else
            snprintf(buf, n,
                     "node %u did not answer for %u ms (PSP_PEER_TIMEOUT_MS): is " PROG
                     " --server running there?",
                     f->err_node, pt);
        break;
    case -ECONNRESET:
        snprintf(buf, n, "node %u restarted during the run (its connection was reset)",
                 f->err_node);
        break;
    case -ETIME:
        snprintf(buf, n,
                 "the run did not finish within --timeout %" PRIu64 " s (while %s); give a "
                 "larger --timeout for bigger runs",
                 f->timeout_s, f->phase ? f->phase : "running");
        break;
    case -EINVAL:
        snprintf(buf, n, "the firmware refused a send to node %u (invalid destination or length)",
                 f->err_node);
        break;
    default:
        snprintf(buf, n, "a send to node %u failed: %s", f->err_node, strerror(-f->err));
        break;
    }
}

/*
 * What the firmware holds for the peer, on stderr: the state a run that hangs is stuck in
 * (connection, busy send slots, host queue, non-zero counters).
 */
static void fw_dump(struct fw *f)
{
    struct mcp_image *img = f->img;
    if (f->peer >= img->cfg.max_nodes)
        return;
    const struct mcp_conn *c = mcp_conn(img, f->peer);
    fprintf(stderr,
            PROG ": state of the connection to node %u: state %u local_cid %08x peer_cid %08x "
                 "have_peer %u confirmed %u snd_una %u snd_nxt %u snd_tx %u rcv_nxt %u "
                 "ack_pending %u rto %u us queued %s\n",
            f->peer, c->state, c->local_cid, c->peer_cid, c->have_peer, c->confirmed, c->snd_una,
            c->snd_nxt, c->snd_tx, c->rcv_nxt, c->ack_pending, c->rto_us,
            c->q_head != MCP_NIL ? "yes" : "no");
    fprintf(stderr, PROG ": send slots of context %u:", f->ctx);
    for (uint32_t i = 0; i < img->cfg.send_slots; i++) {
        const struct mcp_send_slot *sl = mcp_sslot(img, f->ctx * img->cfg.send_slots + i);
        uint32_t st = MCP_LOAD_ACQ(&sl->state);
        if (st != MCP_SLOT_IDLE)
            fprintf(stderr, " [%u %s seq %u len %u]", i, mcp_slot_state_name(st), sl->seq, sl->len);
    }
    fprintf(stderr, "\n" PROG ": host queue: head %u tail %u; non-zero counters:", img->hostq_head,
            img->hostq_tail);
    for (unsigned i = 0; i < mcp_counter_count(); i++)
        if (mcp_counter_value(img, i))
            fprintf(stderr, " %s=%" PRIu64, mcp_counter_name(i), mcp_counter_value(img, i));
    fprintf(stderr, "\n");
}

/* Client: stop on a firmware error. */
static void fw_must(struct fw *f, int rc)
{
    char msg[512];
    if (!rc)
        return;
    if (!f->err)
        f->err = rc;
    fw_err_text(f, msg, sizeof msg);
    fflush(stdout);
    if (f->err == -ETIME)
        fw_dump(f);
    psp_fail_exit("%s", msg);
}

/* Copy a message to the peer, polling while the send ring is full. */
static int fw_send_buf(struct fw *f, const void *data, uint32_t len)
{
    for (;;) {
        int rc = mcp_send(f->img, f->ctx, f->peer, data, len, f->cookie++);
        if (rc == 0)
            return 0;
        if (rc != -EAGAIN)
            return rc;
        if ((rc = fw_pump(f)))
            return rc;
    }
}

/* Send a control message (split into chunks that fit a frame), then run one pass. */
static int fw_send_ctl(struct fw *f, unsigned type, const struct wbuf *w)
{
    uint8_t chunk[CTL_HDR + CTL_MAX];
    uint32_t room = f->max_payload - CTL_HDR, off = 0;
    uint16_t no = 0;
    int rc;

    if (w->n > CTL_MAX)
        return -EMSGSIZE;
    do {
        uint32_t n = w->n - off < room ? w->n - off : room;
        mcp_put_le32(chunk, CTL_MAGIC);
        mcp_put_le16(chunk + 4, (uint16_t)type);
        mcp_put_le16(chunk + 6, no++);
        mcp_put_le32(chunk + 8, w->n);
        mcp_put_le32(chunk + 12, off);
        memcpy(chunk + CTL_HDR, w->b + off, n);
        if ((rc = fw_send_buf(f, chunk, CTL_HDR + n)))
            return rc;
        off += n;
    } while (off < w->n);
    return fw_pump(f);
}

/*
 * Feed a received message to the control reassembly.  Returns 1 when a whole control message
 * is in f->ctl (type f->ctl_type, f->ctl_total bytes), 0 when more chunks are needed, -1 when
 * the message is not a control chunk in sequence.
 */
static int ctl_feed(struct fw *f, const struct mcp_rx_desc *d)
{
    const uint8_t *p = d->data;
    if (d->len < CTL_HDR || mcp_get_le32(p) != CTL_MAGIC)
        return -1;
    uint16_t type = mcp_get_le16(p + 4), no = mcp_get_le16(p + 6);
    uint32_t total = mcp_get_le32(p + 8), off = mcp_get_le32(p + 12), n = d->len - CTL_HDR;
    if (type == 0 || type >= CTL_TYPE_MAX || total > CTL_MAX || off + n > total)
        return -1;
    if (off == 0 && no == 0) {
        f->ctl_open = true;
        f->ctl_type = type;
        f->ctl_total = total;
        f->ctl_have = 0;
        f->ctl_chunk = 0;
    } else if (!f->ctl_open || type != f->ctl_type || total != f->ctl_total || off != f->ctl_have ||
               no != f->ctl_chunk) {
        f->ctl_open = false;
        return -1;
    }
    memcpy(f->ctl + off, p + CTL_HDR, n);
    f->ctl_have += n;
    f->ctl_chunk++;
    if (f->ctl_have < f->ctl_total)
        return 0;
    f->ctl_open = false;
    return 1;
}

/*
 * Client: wait for the next message from the peer (others are counted as stray).  The server
 * answers every request at once, so a peer that stays silent for the peer timeout after all our
 * sends were acknowledged is as dead as one that does not acknowledge them.
 */
static void fw_recv(struct fw *f, struct mcp_rx_desc *d)
{
    uint64_t start = mcp_now_ns(), limit = (uint64_t)f->img->cfg.peer_timeout_ms * 1000000ull;
    unsigned spins = 0;
    for (;;) {
        while (mcp_recv_peek(f->img, d)) {
            if (d->src == f->peer)
                return;
            f->stray++;
            mcp_recv_done(f->img);
        }
        fw_must(f, fw_pump(f));
        if (++spins % 4096 == 0) {
            uint64_t now = mcp_now_ns();
            if (now - start > limit) {
                if (mcp_send_busy(f->img, f->ctx) == 0) {
                    f->err_node = f->peer;
                    fw_must(f, -ETIMEDOUT);
                }
                start = now - limit / 2; /* sends pending: the firmware watches the peer */
            }
        }
    }
}

/* Client: wait for control message `type`; its fields are read through r. */
static void fw_recv_ctl(struct fw *f, unsigned type, struct rbuf *r)
{
    struct mcp_rx_desc d;
    for (;;) {
        fw_recv(f, &d);
        int rc = ctl_feed(f, &d);
        mcp_recv_done(f->img);
        if (rc < 0)
            psp_fail_exit("protocol error: unexpected message from node %u while waiting for %s "
                          "(is the server another version of " PROG "?)",
                          f->peer, ctl_name(type));
        if (rc == 0)
            continue;
        if (f->ctl_type != type)
            psp_fail_exit("protocol error: got %s from node %u while waiting for %s",
                          ctl_name(f->ctl_type), f->peer, ctl_name(type));
        r->b = f->ctl;
        r->n = f->ctl_total;
        r->pos = 0;
        r->bad = false;
        return;
    }
}

static void client_send_ctl(struct fw *f, unsigned type, const struct wbuf *w)
{
    fw_must(f, fw_send_ctl(f, type, w));
}

/* Open the link, format the image, attach a context. Exits on failure. */
static void fw_open(struct fw *f, struct setup *s, const struct opts *o)
{
    char err[512];
    struct mcp_link_params lp;

    memset(&lp, 0, sizeof(lp));
    lp.node = s->node;
    lp.nodes = s->nodes;
    lp.ifname = s->ifname;
    lp.fault = s->fault;
    lp.fd = -1;
    err[0] = '\0';
    f->link = mcp_link_open(s->link_kind, &lp, err, sizeof err);
    if (!f->link)
        psp_fail_exit("cannot open the %s link of node %u: %s", s->link_kind, s->node,
                      err[0] ? err : "unknown error");

    if (mcp_config_from_settings(&s->cfg, s->node, f->link->max_frame, err, sizeof err))
        config_error("%s", err);
    size_t size = mcp_image_size(&s->cfg);
    if (!size)
        config_error("the firmware configuration is invalid (see psinfo -c)");
    size = (size + MCP_CACHELINE - 1) / MCP_CACHELINE * MCP_CACHELINE;
    f->img = aligned_alloc(MCP_CACHELINE, size);
    if (!f->img)
        psp_fail_exit("cannot allocate a NIC image of %zu bytes", size);
    int rc = mcp_image_format(f->img, size, &s->cfg);
    if (rc)
        psp_fail_exit("cannot format the NIC image: %s", strerror(-rc));
    mcp_nic_init(&f->nic, f->img, f->link);
    rc = mcp_ctx_attach(f->img, (uint32_t)getpid());
    if (rc < 0)
        psp_fail_exit("cannot attach a NIC context: %s", strerror(-rc));
    f->ctx = (unsigned)rc;
    f->max_payload = mcp_max_payload(f->img);
    f->self = s->node;
    f->server = o->server;
    f->timeout_s = o->timeout_s;
    if (f->max_payload < MIN_PAYLOAD)
        config_error("frames of %u payload bytes are too small for " PROG
                     " (at least %u): raise PSP_FRAME_SIZE",
                     f->max_payload, MIN_PAYLOAD);
}

/* The counters of this NIC, then the link's, as one array (names from counter_label()). */
#define LINK_STATS 13
static unsigned all_counter_count(void)
{
    return mcp_counter_count() + LINK_STATS;
}

static const char *counter_label(unsigned i, const char **help)
{
    static const char *const names[LINK_STATS] = {
        "link.tx_frames",     "link.rx_frames",        "link.tx_dropped_full",
        "link.fault_dropped", "link.fault_duplicated", "link.fault_corrupted",
        "link.tx_errors",     "link.rx_errors",        "link.tx_eth",
        "link.rx_eth",        "link.tx_hello",         "link.rx_hello",
        "link.eth_forgotten"};
    static const char *const helps[LINK_STATS] = {"frames handed to the kernel",
                                                  "frames handed to the firmware",
                                                  "frames dropped at flush: socket buffer full",
                                                  "frames dropped by fault injection",
                                                  "frames duplicated by fault injection",
                                                  "frames corrupted by fault injection",
                                                  "frames the kernel refused to send",
                                                  "errors the socket reported on receive",
                                                  "udp: frames sent as Ethernet frames",
                                                  "udp: Ethernet frames read",
                                                  "udp: hellos sent (this link reads Ethernet)",
                                                  "udp: hellos read",
                                                  "udp: peers sent datagrams again (no ring)"};
    unsigned n = mcp_counter_count();
    if (i < n) {
        *help = mcp_counter_help(i);
        return mcp_counter_name(i);
    }
    *help = helps[i - n];
    return names[i - n];
}

static void read_counters(struct fw *f, uint64_t *v)
{
    unsigned n = mcp_counter_count();
    struct mcp_link_stats ls;
    for (unsigned i = 0; i < n; i++)
        v[i] = mcp_counter_value(f->img, i);
    memset(&ls, 0, sizeof(ls));
    mcp_link_stats(f->link, &ls);
    v[n + 0] = ls.tx_frames;
    v[n + 1] = ls.rx_frames;
    v[n + 2] = ls.tx_dropped_full;
    v[n + 3] = ls.fault_dropped;
    v[n + 4] = ls.fault_duplicated;
    v[n + 5] = ls.fault_corrupted;
    v[n + 6] = ls.tx_errors;
    v[n + 7] = ls.rx_errors;
    v[n + 8] = ls.tx_eth;
    v[n + 9] = ls.rx_eth;
    v[n + 10] = ls.tx_hello;
    v[n + 11] = ls.rx_hello;
    v[n + 12] = ls.eth_forgotten;
}

/* ---------------------------------------------------------------------------------------- */
/* Raw UDP sockets (the baseline)                                                           */
/* ---------------------------------------------------------------------------------------- */

#define RAW_PING   0x52500001u
#define RAW_DATA   0x52500002u
#define RAW_CREDIT 0x52500003u
#define RAW_FIN    0x52500004u
#define RAW_TOTAL  0x52500005u
#define RAW_BATCH  64
#define RAW_MAXDG  65507u
#define RAW_BUF    (8 << 20)

static void sock_buffers(int fd, int bytes)
{
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes))
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes))
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

/* A non-blocking UDP socket bound to node `self`'s address, port + 1, connected to `peer`'s. */
static int raw_open(const struct psp_nodes *nodes, uint16_t self, uint16_t peer, char *err,
                    size_t errlen)
{
    const struct psp_node_addr *a = &nodes->node[self], *b = &nodes->node[peer];
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sock_buffers(fd, RAW_BUF);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr = a->ip;
    sa.sin_port = htons((uint16_t)(a->port + 1));
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa)) {
        snprintf(err, errlen, "cannot bind the raw UDP socket to %s:%u: %s", inet_ntoa(a->ip),
                 a->port + 1, strerror(errno));
        close(fd);
        return -1;
    }
    sa.sin_addr = b->ip;
    sa.sin_port = htons((uint16_t)(b->port + 1));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        snprintf(err, errlen, "cannot connect the raw UDP socket to %s:%u: %s", inet_ntoa(b->ip),
                 b->port + 1, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Batch of receive buffers for recvmmsg. */
struct rawbatch {
    uint8_t *buf; /* RAW_BATCH * cap */
    uint32_t cap;
    struct mmsghdr msg[RAW_BATCH];
    struct iovec iov[RAW_BATCH];
};

static int rawbatch_init(struct rawbatch *b, uint32_t cap)
{
    b->cap = cap;
    b->buf = malloc((size_t)RAW_BATCH * cap);
    if (!b->buf)
        return -ENOMEM;
    memset(b->msg, 0, sizeof(b->msg));
    for (int i = 0; i < RAW_BATCH; i++) {
        b->iov[i].iov_base = b->buf + (size_t)i * cap;
        b->iov[i].iov_len = cap;
        b->msg[i].msg_hdr.msg_iov = &b->iov[i];
        b->msg[i].msg_hdr.msg_iovlen = 1;
    }
    return 0;
}

static int rawbatch_recv(struct rawbatch *b, int fd)
{
    int n = recvmmsg(fd, b->msg, RAW_BATCH, MSG_DONTWAIT, NULL);
    return n < 0 ? 0 : n;
}

static uint8_t *rawbatch_data(struct rawbatch *b, int i)
{
    return b->buf + (size_t)i * b->cap;
}

/* ---------------------------------------------------------------------------------------- */
/* Statistics and printing                                                                  */
/* ---------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct lat {
    uint32_t size;
    bool valid;
    double med, min, max; /* microseconds, one way */
    uint64_t lost;        /* raw: datagrams resent after a timeout */
};

static void lat_stats(struct lat *l, double *us, uint64_t n)
{
    qsort(us, n, sizeof(double), cmp_double);
    l->min = us[0];
    l->max = us[n - 1];
    l->med = n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
    l->valid = true;
}

struct tput {
    bool valid, ok;
    uint64_t bytes, msgs;
    uint32_t msg_size;
    double secs;
    double loss_pct; /* raw */
};

static double mbps(const struct tput *t)
{
    return t->secs > 0 ? (double)t->bytes / t->secs / 1e6 : 0;
}

struct results {
    struct lat fw[MAX_SIZES + 1], raw[MAX_SIZES + 1];
    unsigned nfw, nraw;
    struct tput stream, verify, raw_stream;
    unsigned failures;
    char why[8][256];
    unsigned nwhy;
};

static void add_failure(struct results *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void add_failure(struct results *r, const char *fmt, ...)
{
    va_list ap;
    r->failures++;
    if (r->nwhy < 8) {
        va_start(ap, fmt);
        vsnprintf(r->why[r->nwhy++], sizeof r->why[0], fmt, ap);
        va_end(ap);
    }
}

static void print_lat_table(const char *title, const struct lat *l, unsigned n, bool raw,
                            uint64_t iters, uint64_t warmup)
{
    printf("\n%s\n", title);
    printf("  latency = round trip / 2 in µs, %" PRIu64 " iterations per size after %" PRIu64
           " warm-up\n",
           iters, warmup);
    printf("  %8s %12s %12s %12s%s\n", "bytes", "median", "min", "max", raw ? "   resent" : "");
    for (unsigned i = 0; i < n; i++) {
        if (!l[i].valid)
            continue;
        printf("  %8u %12.2f %12.2f %12.2f", l[i].size, l[i].med, l[i].min, l[i].max);
        if (raw)
            printf(" %8" PRIu64, l[i].lost);
        printf("\n");
    }
}

static void print_tput_header(void)
{
    printf("  %12s %9s %10s %9s %11s %9s %11s\n", "bytes", "msg size", "messages", "time s", "MB/s",
           "Gbit/s", "msg/s");
}

static void print_tput_row(const struct tput *t)
{
    double mb = mbps(t);
    printf("  %12" PRIu64 " %9u %10" PRIu64 " %9.3f %11.1f %9.2f %11.0f\n", t->bytes, t->msg_size,
           t->msgs, t->secs, mb, mb * 8 / 1000, t->secs > 0 ? t->msgs / t->secs : 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Client                                                                                   */
/* ---------------------------------------------------------------------------------------- */

struct client {
    struct fw *f;
    struct setup *s;
    const struct opts *o;
    struct results r;
    uint32_t msg_size;       /* stream message size in use */
    uint32_t peer_payload;   /* the server's largest payload */
    char peer_desc[512];     /* the server's configuration, as it describes it */
    uint64_t *peer_counters; /* from FINISH_RES */
    unsigned npeer_counters;
    uint64_t peer_failures, peer_stray;
};

static void describe_fw(struct fw *f, const struct setup *s, char *buf, size_t n)
{
    const struct mcp_config *c = &f->img->cfg;
    snprintf(buf, n,
             "%s link, window %u, frame %u+%u B, send slots %u, recv slots %u, rto %u us, "
             "ack delay %u us, peer timeout %u ms; faults: loss %g dup %g corrupt %g seed %" PRIu64,
             s->link_kind, c->window, c->slot_size, MCP_WIRE_HDR, c->send_slots, c->recv_slots,
             c->rto_us, c->ack_delay_us, c->peer_timeout_ms, s->fault.loss, s->fault.dup,
             s->fault.corrupt, s->fault.seed);
}

/* HELLO / WELCOME, retrying while the server is not up yet. */
static void client_hello(struct client *cl)
{
    struct fw *f = cl->f;
    uint64_t run_id = mix64(mcp_now_ns() ^ ((uint64_t)getpid() << 32));
    struct wbuf w;
    struct rbuf r;
    char desc[512];
    uint64_t start = mcp_now_ns();

    describe_fw(f, cl->s, desc, sizeof desc);
    f->phase = "waiting for the server";
    for (unsigned attempt = 1;; attempt++) {
        w.n = 0;
        w32(&w, PP_VERSION);
        w64(&w, run_id);
        w32(&w, attempt);
        w32(&w, cl->o->tests);
        w32(&w, f->max_payload);
        wstr(&w, desc);
        int rc = fw_send_ctl(f, CTL_HELLO, &w);
        struct mcp_rx_desc d;
        while (!rc) {
            if (mcp_recv_peek(f->img, &d)) {
                if (d.src != f->peer) {
                    f->stray++;
                    mcp_recv_done(f->img);
                    continue;
                }
                int c = ctl_feed(f, &d);
                mcp_recv_done(f->img);
                if (c < 0)
                    continue; /* left over from an earlier run: not ours */
                if (c == 0)
                    continue;
                r.b = f->ctl;
                r.n = f->ctl_total;
                r.pos = 0;
                r.bad = false;
                if (f->ctl_type != CTL_WELCOME)
                    continue;
                uint32_t ver = r32(&r);
                uint64_t id = r64(&r);
                uint32_t att = r32(&r);
                if (ver != PP_VERSION)
                    psp_fail_exit("node %u runs " PROG " protocol version %u, this one %u: use the "
                                  "same build on both nodes",
                                  f->peer, ver, PP_VERSION);
                if (id != run_id || att != attempt)
                    continue;
                cl->peer_payload = r32(&r);
                rstr(&r, cl->peer_desc, sizeof cl->peer_desc);
                if (r.bad)
                    psp_fail_exit("protocol error: short WELCOME from node %u", f->peer);
                return;
            }
            rc = fw_pump(f);
        }
        if (rc == -ETIMEDOUT && attempt < HELLO_TRIES) {
            double waited = (mcp_now_ns() - start) / 1e9;
            fprintf(stderr,
                    PROG ": node %u did not answer yet (%.1f s): retrying (is " PROG
                         " --server starting there?)\n",
                    f->peer, waited);
            f->err = 0;
            f->ctl_open = false;
            continue;
        }
        if (rc == -ETIME)
            psp_fail_exit("node %u did not answer within --timeout %" PRIu64 " s: is " PROG
                          " --server running there?",
                          f->peer, cl->o->timeout_s);
        fw_must(f, rc);
    }
}

static void client_pingpong(struct client *cl)
{
    struct fw *f = cl->f;
    const struct opts *o = cl->o;
    double *us = malloc(sizeof(double) * o->iters);
    uint8_t *buf = malloc(65536);
    if (!us || !buf)
        psp_fail_exit("out of memory");
    for (uint32_t i = 0; i < 65536; i++)
        buf[i] = (uint8_t)(i * 7 + 1);

    f->phase = "firmware ping-pong";
    for (unsigned k = 0; k < o->nsizes; k++) {
        uint32_t size = o->sizes[k];
        struct lat *l = &cl->r.fw[cl->r.nfw++];
        uint64_t total = o->warmup + o->iters;
        struct wbuf w = {.n = 0};

        l->size = size;
        if (size > f->max_payload || size > cl->peer_payload) {
            printf("  (ping-pong %u B skipped: larger than the frame payload %u B)\n", size,
                   f->max_payload < cl->peer_payload ? f->max_payload : cl->peer_payload);
            continue;
        }
        w32(&w, size);
        w64(&w, total);
        client_send_ctl(f, CTL_PP_BEGIN, &w);
        for (uint64_t i = 0; i < total; i++) {
            struct mcp_rx_desc d;
            uint64_t t0 = mcp_now_ns();
            mcp_put_le32(buf, (uint32_t)i);
            mcp_put_le32(buf + 4, size);
            fw_must(f, fw_send_buf(f, buf, size));
            fw_must(f, fw_pump(f));
            fw_recv(f, &d);
            uint64_t t1 = mcp_now_ns();
            const uint8_t *p = d.data;
            if (d.len != size || mcp_get_le32(p) != (uint32_t)i || mcp_get_le32(p + 4) != size ||
                memcmp(p + 8, buf + 8, size - 8)) {
                add_failure(&cl->r,
                            "firmware ping-pong %u B: reply %" PRIu64 " is wrong (%u bytes, stamp "
                            "%u)",
                            size, i, d.len, d.len >= 4 ? mcp_get_le32(p) : 0);
                mcp_recv_done(f->img);
                psp_fail_exit("%s", cl->r.why[cl->r.nwhy - 1]);
            }
            mcp_recv_done(f->img);
            if (i >= o->warmup)
                us[i - o->warmup] = (double)(t1 - t0) / 2000.0;
        }
        lat_stats(l, us, o->iters);
    }
    free(us);
    free(buf);
    print_lat_table("firmware ping-pong (RDP, host-driven firmware)", cl->r.fw, cl->r.nfw, false,
                    o->iters, o->warmup);
}

/* Stream (verify = false) or verified stream (verify = true) of --bytes. */
static void client_stream(struct client *cl, bool verify)
{
    struct fw *f = cl->f;
    const struct opts *o = cl->o;
    uint64_t bytes = o->bytes;
    uint32_t ms = cl->msg_size;
    uint64_t msgs = (bytes + ms - 1) / ms;
    struct tput *t = verify ? &cl->r.verify : &cl->r.stream;
    uint8_t *pattern = verify ? NULL : make_pattern(ms);
    struct wbuf w = {.n = 0};
    struct rbuf r;
    uint32_t crc = 0;
    uint64_t off = 0;

    if (!verify && !pattern)
        psp_fail_exit("out of memory");
    f->phase = verify ? "verified stream" : "stream";
    w32(&w, verify);
    w64(&w, bytes);
    w64(&w, msgs);
    w32(&w, ms);
    client_send_ctl(f, CTL_STREAM, &w);

    uint64_t t0 = mcp_now_ns();
    for (uint64_t k = 0; k < msgs;) {
        uint32_t slot;
        uint8_t *p = mcp_send_slot(f->img, f->ctx, &slot);
        if (!p) {
            fw_must(f, fw_pump(f));
            continue;
        }
        uint32_t len = bytes - off < ms ? (uint32_t)(bytes - off) : ms;
        if (verify) {
            verify_fill(p, len, off, k);
        } else {
            memcpy(p, pattern + stream_pos(k), len);
            crc = mcp_crc32c(crc, p, len);
        }
        mcp_send_post(f->img, f->ctx, slot, f->peer, len, f->cookie++);
        off += len;
        k++;
        if (k % 16 == 0)
            fw_must(f, fw_pump(f));
    }
    fw_recv_ctl(f, CTL_STREAM_RES, &r);
    uint64_t t1 = mcp_now_ns();
    free(pattern);

    uint64_t got_bytes = r64(&r), got_msgs = r64(&r);
    uint32_t got_crc = r32(&r);
    uint64_t bad_msgs = r64(&r), bad_bytes = r64(&r), order = r64(&r), srv_ns = r64(&r);
    char first[512];
    rstr(&r, first, sizeof first);
    if (r.bad)
        psp_fail_exit("protocol error: short STREAM_RES from node %u", f->peer);

    t->valid = true;
    t->bytes = bytes;
    t->msgs = msgs;
    t->msg_size = ms;
    t->secs = (double)(t1 - t0) / 1e9;
    t->ok = got_bytes == bytes && got_msgs == msgs && bad_msgs == 0 && bad_bytes == 0 &&
            order == 0 && (verify || got_crc == crc);

    printf("\nfirmware %s: client -> server, timed until the server's confirmation\n",
           verify ? "verified stream (server checks offset, number and every byte)"
                  : "stream (server confirms byte count and CRC-32C)");
    print_tput_header();
    print_tput_row(t);
    if (verify)
        printf("  server: %" PRIu64 " bytes in %" PRIu64 " messages checked, %" PRIu64
               " bad messages, %" PRIu64 " bad bytes, %" PRIu64 " out of order (%.1f MB/s "
               "between its first and last message)\n",
               got_bytes, got_msgs, bad_msgs, bad_bytes, order,
               srv_ns ? (double)got_bytes / ((double)srv_ns / 1e9) / 1e6 : 0.0);
    else
        printf("  server: %" PRIu64 " bytes in %" PRIu64 " messages, crc32c %08x (sent %08x)\n",
               got_bytes, got_msgs, got_crc, crc);
    printf("  result: %s\n", t->ok ? "OK" : "FAILED");
    if (!t->ok) {
        if (got_bytes != bytes || got_msgs != msgs)
            add_failure(&cl->r,
                        "%s: server received %" PRIu64 " bytes in %" PRIu64
                        " messages, sent %" PRIu64 " in %" PRIu64,
                        f->phase, got_bytes, got_msgs, bytes, msgs);
        else if (!verify && got_crc != crc)
            add_failure(&cl->r, "stream: CRC-32C mismatch: server %08x, client %08x", got_crc, crc);
        else
            add_failure(&cl->r,
                        "verified stream: %" PRIu64 " bad messages, %" PRIu64 " bad bytes, %" PRIu64
                        " out of order; first: %s",
                        bad_msgs, bad_bytes, order, first);
        printf("  first error: %s\n", first[0] ? first : cl->r.why[cl->r.nwhy - 1]);
    }
}

/* Every millisecond during the raw baseline: keep the firmware's timers and ACKs going. */
static void raw_fw_tick(struct fw *f, uint64_t now, uint64_t *last)
{
    if (now - *last >= 1000000) {
        fw_must(f, fw_pump(f));
        *last = now;
    }
}

static void client_raw_pingpong(struct client *cl, int fd, unsigned nsizes, const uint32_t *sizes)
{
    struct fw *f = cl->f;
    const struct opts *o = cl->o;
    double *us = malloc(sizeof(double) * o->iters);
    uint8_t *out = malloc(RAW_MAXDG), *in = malloc(RAW_MAXDG);
    uint64_t last_fw = mcp_now_ns();
    if (!us || !out || !in)
        psp_fail_exit("out of memory");
    memset(out, 0x5a, RAW_MAXDG);
    f->phase = "raw UDP ping-pong";
    for (unsigned k = 0; k < nsizes; k++) {
        uint32_t size = sizes[k];
        struct lat *l = &cl->r.raw[cl->r.nraw++];
        uint64_t total = o->warmup + o->iters;
        l->size = size;
        mcp_put_le32(out, RAW_PING);
        for (uint64_t i = 0; i < total; i++) {
            mcp_put_le32(out + 4, (uint32_t)i);
            uint64_t t0 = mcp_now_ns(), sent = t0, t1;
            if (send(fd, out, size, 0) < 0 && errno != EAGAIN && errno != ENOBUFS &&
                errno != ECONNREFUSED)
                psp_fail_exit("raw UDP send: %s", strerror(errno));
            for (;;) {
                ssize_t n = recv(fd, in, RAW_MAXDG, MSG_DONTWAIT);
                t1 = mcp_now_ns();
                idle_note(&f->idle, n >= 0, t1);
                if (n == (ssize_t)size && mcp_get_le32(in) == RAW_PING &&
                    mcp_get_le32(in + 4) == (uint32_t)i)
                    break;
                if (t1 - sent > 50000000) { /* 50 ms: lost, send again */
                    l->lost++;
                    sent = t1;
                    if (send(fd, out, size, 0) < 0 && errno != EAGAIN && errno != ENOBUFS &&
                        errno != ECONNREFUSED)
                        psp_fail_exit("raw UDP send: %s", strerror(errno));
                }
                if (n < 0)
                    raw_fw_tick(f, t1, &last_fw);
                if (f->deadline_ns && t1 > f->deadline_ns)
                    fw_must(f, -ETIME);
            }
            if (i >= o->warmup)
                us[i - o->warmup] = (double)(t1 - t0) / 2000.0;
        }
        lat_stats(l, us, o->iters);
    }
    free(us);
    free(out);
    free(in);
    print_lat_table("raw UDP ping-pong (non-blocking sockets, busy polling)", cl->r.raw, cl->r.nraw,
                    true, o->iters, o->warmup);
}

/*
 * Raw stream: datagrams of msg_size + 32 bytes (the firmware's frame size) in sendmmsg batches.
 * Credit window: at most `win` datagrams beyond the highest one the receiver has reported; the
 * receiver reports every `every` datagrams.  A stall of 2 ms without credit (lost datagrams or
 * reports) releases one more window.  The receiver's totals arrive after a FIN.
 */
static void raw_window(uint32_t dsize, uint32_t *win, uint32_t *every)
{
    *win = (2u << 20) / dsize;
    if (*win < 32)
        *win = 32;
    if (*win > 4096)
        *win = 4096;
    *every = *win / 8;
}

static void client_raw_stream(struct client *cl, int fd)
{
    struct fw *f = cl->f;
    uint32_t ms = cl->msg_size, dsize = ms + MCP_WIRE_HDR, win, every;
    uint64_t n = (cl->o->bytes + ms - 1) / ms;
    raw_window(dsize, &win, &every);
    struct tput *t = &cl->r.raw_stream;
    struct rawbatch rb;
    struct mmsghdr msg[RAW_BATCH];
    struct iovec iov[RAW_BATCH];
    uint8_t *out = calloc(RAW_BATCH, dsize);
    uint64_t seq = 0, credited = 0, stalls = 0, last_fw = mcp_now_ns();
    uint64_t rcvd = 0, rcvd_bytes = 0;
    bool have_total = false;

    if (dsize > RAW_MAXDG)
        psp_fail_exit("raw stream: datagrams of %u bytes are larger than UDP allows", dsize);
    if (!out || rawbatch_init(&rb, 64))
        psp_fail_exit("out of memory");
    memset(msg, 0, sizeof msg);
    for (int i = 0; i < RAW_BATCH; i++) {
        uint8_t *p = out + (size_t)i * dsize;
        memset(p, 0xa5, dsize);
        mcp_put_le32(p, RAW_DATA);
        mcp_put_le32(p + 4, 0);
        iov[i].iov_base = p;
        iov[i].iov_len = dsize;
        msg[i].msg_hdr.msg_iov = &iov[i];
        msg[i].msg_hdr.msg_iovlen = 1;
    }

    f->phase = "raw UDP stream";
    uint64_t t0 = mcp_now_ns(), last_progress = t0;
    while (seq < n) {
        uint64_t now = mcp_now_ns();
        uint64_t room = credited + win > seq ? credited + win - seq : 0;
        bool sent_any = false;
        if (room) {
            uint64_t b = room < RAW_BATCH ? room : RAW_BATCH;
            if (b > n - seq)
                b = n - seq;
            for (uint64_t i = 0; i < b; i++)
                put64(out + (size_t)i * dsize + 8, seq + i);
            int s = sendmmsg(fd, msg, (unsigned)b, MSG_DONTWAIT);
            sent_any = s > 0;
            if (s > 0)
                seq += (uint64_t)s;
            else if (s < 0 && errno != EAGAIN && errno != ENOBUFS && errno != ECONNREFUSED)
                psp_fail_exit("raw UDP sendmmsg: %s", strerror(errno));
        }
        int got = rawbatch_recv(&rb, fd);
        for (int i = 0; i < got; i++) {
            const uint8_t *p = rawbatch_data(&rb, i);
            if (rb.msg[i].msg_len >= 16 && mcp_get_le32(p) == RAW_CREDIT) {
                uint64_t c = get64(p + 8);
                if (c > credited && c <= seq) {
                    credited = c;
                    last_progress = now;
                }
            }
        }
        if (!got && now - last_progress > 2000000) {
            credited = seq; /* reports or datagrams lost: release a window */
            stalls++;
            last_progress = now;
        }
        raw_fw_tick(f, now, &last_fw);
        idle_note(&f->idle, sent_any || got > 0, now);
        if (f->deadline_ns && now > f->deadline_ns)
            fw_must(f, -ETIME);
    }
    /* FIN until the receiver's totals arrive (it answers every FIN). */
    uint8_t fin[24];
    mcp_put_le32(fin, RAW_FIN);
    mcp_put_le32(fin + 4, 0);
    put64(fin + 8, seq);
    put64(fin + 16, seq * dsize);
    uint64_t t1 = 0;
    for (int tries = 0; tries < 200 && !have_total; tries++) {
        if (send(fd, fin, sizeof fin, 0) < 0 && errno != EAGAIN && errno != ENOBUFS &&
            errno != ECONNREFUSED)
            psp_fail_exit("raw UDP send: %s", strerror(errno));
        uint64_t sent = mcp_now_ns();
        while (!have_total && mcp_now_ns() - sent < 10000000) {
            int got = rawbatch_recv(&rb, fd);
            for (int i = 0; i < got; i++) {
                const uint8_t *p = rawbatch_data(&rb, i);
                if (rb.msg[i].msg_len >= 24 && mcp_get_le32(p) == RAW_TOTAL) {
                    rcvd = get64(p + 8);
                    rcvd_bytes = get64(p + 16);
                    have_total = true;
                    t1 = mcp_now_ns();
                }
            }
            uint64_t now = mcp_now_ns();
            raw_fw_tick(f, now, &last_fw);
            idle_note(&f->idle, got > 0, now);
            if (f->deadline_ns && now > f->deadline_ns)
                fw_must(f, -ETIME);
        }
    }
    free(out);
    free(rb.buf);

    printf("\nraw UDP stream: %" PRIu64 " datagrams of %u bytes (msg size %u + the firmware's "
           "%u-byte header), sendmmsg/recvmmsg batches of %d;\n"
           "  credit window %u datagrams, receiver reports every %u, %" PRIu64
           " stalls released after 2 ms;\n"
           "  MB/s counts %u payload bytes per datagram received, like the firmware figures\n",
           n, dsize, ms, MCP_WIRE_HDR, RAW_BATCH, win, every, stalls, ms);
    if (!have_total) {
        add_failure(&cl->r, "raw UDP stream: node %u never reported what it received", f->peer);
        printf("  result: FAILED (no totals from the receiver)\n");
        return;
    }
    (void)rcvd_bytes;
    t->valid = true;
    t->ok = true;
    t->msgs = rcvd;
    t->bytes = rcvd * ms;
    t->msg_size = ms;
    t->secs = (double)(t1 - t0) / 1e9;
    t->loss_pct = n ? 100.0 * (double)(n - (rcvd < n ? rcvd : n)) / (double)n : 0;
    print_tput_header();
    print_tput_row(t);
    printf("  received %" PRIu64 " of %" PRIu64 " datagrams: loss %.3f %%\n", rcvd, n, t->loss_pct);
}

static void client_raw(struct client *cl)
{
    struct fw *f = cl->f;
    struct wbuf w = {.n = 0};
    struct rbuf r;
    char err[512];
    uint32_t sizes[MAX_SIZES + 1];
    unsigned nsizes = 0;
    bool has8 = false;

    for (unsigned i = 0; i < cl->o->nsizes; i++)
        has8 |= cl->o->sizes[i] == 8;
    if (!has8)
        sizes[nsizes++] = 8;
    for (unsigned i = 0; i < cl->o->nsizes; i++)
        sizes[nsizes++] = cl->o->sizes[i];

    int fd = raw_open(cl->s->nodes, f->self, f->peer, err, sizeof err);
    if (fd < 0) {
        add_failure(&cl->r, "raw UDP baseline: %s", err);
        printf("\nraw UDP baseline: %s\n", err);
        return;
    }
    uint32_t win, every;
    raw_window(cl->msg_size + MCP_WIRE_HDR, &win, &every);
    f->phase = "starting the raw UDP baseline";
    w32(&w, every);
    client_send_ctl(f, CTL_RAW_BEGIN, &w);
    fw_recv_ctl(f, CTL_RAW_READY, &r);
    int32_t status = (int32_t)r32(&r);
    rstr(&r, err, sizeof err);
    if (status) {
        add_failure(&cl->r, "raw UDP baseline: node %u: %s", f->peer, err);
        printf("\nraw UDP baseline: node %u: %s\n", f->peer, err);
        close(fd);
        return;
    }
    /* Let the ACK of RAW_READY go out before the firmware goes quiet. */
    uint64_t until = mcp_now_ns() + 2000ull * f->img->cfg.ack_delay_us + 100000;
    while (mcp_now_ns() < until)
        fw_must(f, fw_pump(f));

    client_raw_pingpong(cl, fd, nsizes, sizes);
    client_raw_stream(cl, fd);
    close(fd);
    w.n = 0;
    client_send_ctl(f, CTL_RAW_END, &w);
}

static void print_counters(struct client *cl, uint64_t *mine)
{
    unsigned n = all_counter_count();
    printf("\nNIC counters (firmware and link)\n");
    printf("  %-22s %14s %14s   %s\n", "counter", "node", "node", "meaning");
    char a[16], b[16];
    snprintf(a, sizeof a, "%u", cl->f->self);
    snprintf(b, sizeof b, "%u", cl->f->peer);
    printf("  %-22s %14s %14s\n", "", a, b);
    for (unsigned i = 0; i < n; i++) {
        const char *help;
        const char *name = counter_label(i, &help);
        char pv[32];
        if (i < cl->npeer_counters)
            snprintf(pv, sizeof pv, "%" PRIu64, cl->peer_counters[i]);
        else
            snprintf(pv, sizeof pv, "-");
        printf("  %-22s %14" PRIu64 " %14s   %s\n", name, mine[i], pv, help);
    }
}

static void ratio(char *buf, size_t n, double a, double b)
{
    if (a > 0 && b > 0)
        snprintf(buf, n, "%.2fx", a / b);
    else
        snprintf(buf, n, "-");
}

static void print_summary(struct client *cl)
{
    struct results *r = &cl->r;
    char rb[32], fa[32], ra[32];
    printf("\nsummary: firmware (RDP over %s) vs raw UDP, node %u -> node %u\n", cl->s->link_kind,
           cl->f->self, cl->f->peer);
    printf("  %-34s %12s %12s %12s\n", "", "firmware", "raw UDP", "firmware/raw");
    for (unsigned i = 0; i < r->nfw; i++) {
        const struct lat *fl = &r->fw[i], *rl = NULL;
        if (!fl->valid)
            continue;
        for (unsigned j = 0; j < r->nraw; j++)
            if (r->raw[j].size == fl->size && r->raw[j].valid)
                rl = &r->raw[j];
        char label[64];
        snprintf(label, sizeof label, "latency %u B, median µs", fl->size);
        snprintf(fa, sizeof fa, "%.2f", fl->med);
        if (rl)
            snprintf(ra, sizeof ra, "%.2f", rl->med);
        else
            snprintf(ra, sizeof ra, "-");
        ratio(rb, sizeof rb, fl->med, rl ? rl->med : 0);
        /* "µs" is two bytes wide in UTF-8 but one column on screen */
        printf("  %-35s %12s %12s %12s\n", label, fa, ra, rb);
    }
    if (r->nfw == 0)
        for (unsigned j = 0; j < r->nraw; j++) {
            char label[64];
            snprintf(label, sizeof label, "latency %u B, median µs", r->raw[j].size);
            snprintf(ra, sizeof ra, "%.2f", r->raw[j].med);
            printf("  %-35s %12s %12s %12s\n", label, "-", ra, "-");
        }
    const struct tput *rs = r->raw_stream.valid ? &r->raw_stream : NULL;
    const struct tput *fs[2] = {r->stream.valid ? &r->stream : NULL,
                                r->verify.valid ? &r->verify : NULL};
    const char *names[2] = {"stream throughput, MB/s", "verified stream throughput, MB/s"};
    for (int k = 0; k < 2; k++) {
        if (!fs[k])
            continue;
        snprintf(fa, sizeof fa, "%.1f", mbps(fs[k]));
        if (rs)
            snprintf(ra, sizeof ra, "%.1f", mbps(rs));
        else
            snprintf(ra, sizeof ra, "-");
        ratio(rb, sizeof rb, mbps(fs[k]), rs ? mbps(rs) : 0);
        printf("  %-34s %12s %12s %12s\n", names[k], fa, ra, rb);
        snprintf(fa, sizeof fa, "%.2f", mbps(fs[k]) * 8 / 1000);
        if (rs)
            snprintf(ra, sizeof ra, "%.2f", mbps(rs) * 8 / 1000);
        ratio(rb, sizeof rb, mbps(fs[k]), rs ? mbps(rs) : 0);
        printf("  %-34s %12s %12s %12s\n", k ? "verified stream, Gbit/s" : "stream, Gbit/s", fa, ra,
               rb);
    }
    if (rs && !fs[0] && !fs[1]) {
        snprintf(ra, sizeof ra, "%.1f", mbps(rs));
        printf("  %-34s %12s %12s %12s\n", names[0], "-", ra, "-");
    }
    if (rs)
        printf("  %-34s %12s %11.3f%% %12s\n", "raw UDP datagram loss", "-", rs->loss_pct, "");
}

static int run_client(struct fw *f, struct setup *s, const struct opts *o)
{
    struct client cl;
    memset(&cl, 0, sizeof cl);
    cl.f = f;
    cl.s = s;
    cl.o = o;

    const struct psp_node_addr *me = &s->nodes->node[f->self], *pe = &s->nodes->node[f->peer];
    char mine[32], theirs[32], desc[512];
    snprintf(mine, sizeof mine, "%s", inet_ntoa(me->ip));
    snprintf(theirs, sizeof theirs, "%s", inet_ntoa(pe->ip));
    describe_fw(f, s, desc, sizeof desc);
    printf(PROG ": node %u (%s:%u) -> node %u (%s:%u)\n", f->self, mine, me->port, f->peer, theirs,
           pe->port);
    printf("  node %u: %s\n", f->self, desc);
    fflush(stdout);

    client_hello(&cl);
    printf("  node %u: %s\n", f->peer, cl.peer_desc);
    cl.msg_size = f->max_payload < cl.peer_payload ? f->max_payload : cl.peer_payload;
    if (o->msg_size) {
        if (o->msg_size > cl.msg_size)
            config_error("--msg-size %" PRIu64 " is larger than the frame payload %u B "
                         "(PSP_FRAME_SIZE, on both nodes)",
                         o->msg_size, cl.msg_size);
        cl.msg_size = (uint32_t)o->msg_size;
    }
    fflush(stdout);

    if (o->tests & T_PINGPONG)
        client_pingpong(&cl);
    fflush(stdout);
    if (o->tests & T_STREAM)
        client_stream(&cl, false);
    fflush(stdout);
    if (o->tests & T_VERIFY)
        client_stream(&cl, true);
    fflush(stdout);
    if (o->tests & T_RAW)
        client_raw(&cl);
    fflush(stdout);

    /* Counters and the server's verdict. */
    struct wbuf w = {.n = 0};
    struct rbuf r;
    f->phase = "collecting the server's counters";
    w32(&w, cl.r.failures);
    client_send_ctl(f, CTL_FINISH, &w);
    fw_recv_ctl(f, CTL_FINISH_RES, &r);
    cl.peer_failures = r64(&r);
    cl.peer_stray = r64(&r);
    unsigned n = r32(&r);
    if (n > 4096 || r.bad)
        psp_fail_exit("protocol error: bad FINISH_RES from node %u", f->peer);
    cl.peer_counters = calloc(n ? n : 1, sizeof(uint64_t));
    if (!cl.peer_counters)
        psp_fail_exit("out of memory");
    for (unsigned i = 0; i < n; i++)
        cl.peer_counters[i] = r64(&r);
    cl.npeer_counters = r.bad ? 0 : n;
    if (n != all_counter_count())
        fprintf(stderr, PROG ": warning: node %u reports %u counters, this build has %u\n", f->peer,
                n, all_counter_count());

    uint64_t *mine_c = calloc(all_counter_count(), sizeof(uint64_t));
    if (!mine_c)
        psp_fail_exit("out of memory");
    read_counters(f, mine_c);

    if (cl.peer_failures)
        add_failure(&cl.r, "node %u found %" PRIu64 " errors", f->peer, cl.peer_failures);
    if (cl.peer_stray)
        add_failure(&cl.r, "node %u received %" PRIu64 " unexpected messages", f->peer,
                    cl.peer_stray);
    if (f->stray)
        add_failure(&cl.r, "node %u received %" PRIu64 " unexpected messages", f->self, f->stray);

    print_summary(&cl);
    if (o->counters)
        print_counters(&cl, mine_c);

    /* BYE: wait (a little) for its acknowledgement so the server sees the end of the run. */
    w.n = 0;
    f->phase = "saying goodbye";
    client_send_ctl(f, CTL_BYE, &w);
    uint64_t until = mcp_now_ns() + 2000000000ull;
    while (mcp_send_busy(f->img, f->ctx) && mcp_now_ns() < until && !fw_pump(f))
        ;

    printf("\n");
    if (cl.r.failures) {
        printf(PROG ": FAILED (%u):\n", cl.r.failures);
        for (unsigned i = 0; i < cl.r.nwhy; i++)
            printf("  - %s\n", cl.r.why[i]);
    } else {
        printf(PROG ": all tests passed\n");
    }
    fflush(stdout);
    free(cl.peer_counters);
    free(mine_c);
    return cl.r.failures ? EXIT_FAIL : EXIT_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Server                                                                                   */
/* ---------------------------------------------------------------------------------------- */

enum sstate { S_WAIT, S_CTL, S_PP, S_STREAM, S_LINGER };

struct server {
    struct fw *f;
    struct setup *s;
    const struct opts *o;
    enum sstate st;
    uint64_t run_id;
    uint64_t session_start, last_activity, linger_until;
    uint64_t failures;
    uint64_t *base; /* counters when the run began */
    uint64_t peer_resets;
    /* ping-pong */
    uint64_t pp_left;
    uint32_t pp_size;
    /* stream */
    bool verify;
    uint64_t s_bytes, s_msgs, s_rcvd, s_nmsg, s_bad_msgs, s_bad_bytes, s_order;
    uint32_t s_crc, s_ms;
    uint64_t t_first, t_last;
    char s_first[256];
    /* raw baseline */
    int raw_fd;
    struct rawbatch rb;
    uint64_t raw_rcvd, raw_bytes, raw_next, raw_reported, raw_every;
    uint64_t last_fw;
    unsigned runs_done;
};

static void server_raw_close(struct server *sv)
{
    if (sv->raw_fd >= 0)
        close(sv->raw_fd);
    sv->raw_fd = -1;
}

static void server_reset(struct server *sv)
{
    server_raw_close(sv);
    sv->st = S_WAIT;
    sv->f->ctl_open = false;
    sv->f->err = 0;
    sv->f->stray = 0;
    sv->f->deadline_ns = 0;
    sv->failures = 0;
}

/* The run with the current client ended badly. */
static void server_abort(struct server *sv, const char *why)
{
    printf(PROG " server: run with node %u failed: %s\n", sv->f->peer, why);
    fflush(stdout);
    fw_dump(sv->f);
    if (!sv->o->forever)
        exit(EXIT_FAIL);
    server_reset(sv);
}

static void server_send_ctl(struct server *sv, unsigned type, const struct wbuf *w)
{
    char msg[512];
    if (fw_send_ctl(sv->f, type, w)) {
        fw_err_text(sv->f, msg, sizeof msg);
        server_abort(sv, msg);
    }
}

static void server_run_done(struct server *sv);

static void server_hello(struct server *sv, uint16_t src, struct rbuf *r)
{
    struct fw *f = sv->f;
    char client_desc[512], desc[512];
    uint32_t ver = r32(r);
    uint64_t id = r64(r);
    uint32_t attempt = r32(r);
    uint32_t tests = r32(r);
    uint32_t payload = r32(r);
    rstr(r, client_desc, sizeof client_desc);
    if (r->bad) {
        printf(PROG " server: malformed HELLO from node %u ignored\n", src);
        return;
    }
    if (sv->st == S_LINGER)
        server_run_done(sv); /* the next run came before the linger ended */
    else if (sv->st != S_WAIT && src == f->peer && id != sv->run_id)
        printf(PROG " server: node %u started a new run; the previous one is abandoned\n", src);
    server_reset(sv);
    f->peer = src;
    sv->run_id = id;
    sv->session_start = sv->last_activity = mcp_now_ns();
    if (sv->o->timeout_s)
        f->deadline_ns = sv->session_start + sv->o->timeout_s * 1000000000ull;
    read_counters(f, sv->base);
    sv->peer_resets = f->img->counters.peer_resets;
    printf(PROG " server: run from node %u (tests:%s%s%s%s, payload %u B): %s\n", src,
           tests & T_PINGPONG ? " pingpong" : "", tests & T_STREAM ? " stream" : "",
           tests & T_VERIFY ? " verify" : "", tests & T_RAW ? " raw" : "", payload, client_desc);
    fflush(stdout);

    struct wbuf w = {.n = 0};
    describe_fw(f, sv->s, desc, sizeof desc);
    w32(&w, PP_VERSION);
    w64(&w, id);
    w32(&w, attempt);
    w32(&w, f->max_payload);
    wstr(&w, desc);
    sv->st = S_CTL;
    if (ver != PP_VERSION)
        printf(PROG " server: node %u speaks protocol version %u, this is %u\n", src, ver,
               PP_VERSION);
    server_send_ctl(sv, CTL_WELCOME, &w);
}

static void server_stream_result(struct server *sv)
{
    struct wbuf w = {.n = 0};
    double secs = (double)(sv->t_last - sv->t_first) / 1e9;
    w64(&w, sv->s_rcvd);
    w64(&w, sv->s_nmsg);
    w32(&w, sv->s_crc);
    w64(&w, sv->s_bad_msgs);
    w64(&w, sv->s_bad_bytes);
    w64(&w, sv->s_order);
    w64(&w, sv->t_last - sv->t_first);
    wstr(&w, sv->s_first);
    printf(PROG " server: %s: %" PRIu64 " bytes in %" PRIu64 " messages, %.1f MB/s, %s\n",
           sv->verify ? "verified stream" : "stream", sv->s_rcvd, sv->s_nmsg,
           secs > 0 ? (double)sv->s_rcvd / secs / 1e6 : 0.0,
           sv->verify ? (sv->s_bad_msgs || sv->s_order ? "ERRORS" : "all bytes verified")
                      : "crc computed");
    if (sv->s_first[0])
        printf(PROG " server: first error: %s\n", sv->s_first);
    fflush(stdout);
    if (sv->verify && (sv->s_bad_msgs || sv->s_order))
        sv->failures++;
    sv->st = S_CTL;
    server_send_ctl(sv, CTL_STREAM_RES, &w);
}

static void server_stream_msg(struct server *sv, const struct mcp_rx_desc *d)
{
    const uint8_t *p = d->data;
    uint64_t now = mcp_now_ns();
    if (sv->s_nmsg == 0)
        sv->t_first = now;
    sv->t_last = now;
    if (sv->verify) {
        uint64_t bad = verify_check(p, d->len, sv->s_rcvd, sv->s_nmsg);
        if (bad) {
            sv->s_bad_msgs++;
            sv->s_bad_bytes += bad;
            bool order = false;
            char what[160];
            if (d->len >= VERIFY_HDR) {
                uint64_t off = get64(p), no = get64(p + 8);
                if (no != sv->s_nmsg || off != sv->s_rcvd) {
                    order = true;
                    sv->s_order++;
                    snprintf(what, sizeof what,
                             "carries message %" PRIu64 " at offset %" PRIu64 " (%s)", no, off,
                             no < sv->s_nmsg ? "a duplicate or old message"
                                             : "messages before it are missing");
                }
            }
            if (!order)
                snprintf(what, sizeof what, "%" PRIu64 " of its %u bytes differ", bad, d->len);
            if (!sv->s_first[0])
                snprintf(sv->s_first, sizeof sv->s_first,
                         "message %" PRIu64 " (stream offset %" PRIu64 ", %u bytes) %s", sv->s_nmsg,
                         sv->s_rcvd, d->len, what);
        }
    } else {
        sv->s_crc = mcp_crc32c(sv->s_crc, p, d->len);
    }
    if (d->len != sv->s_ms && sv->s_rcvd + d->len != sv->s_bytes) {
        sv->s_bad_msgs++;
        if (!sv->s_first[0])
            snprintf(sv->s_first, sizeof sv->s_first,
                     "message %" PRIu64 " has %u bytes, expected %u", sv->s_nmsg, d->len, sv->s_ms);
    }
    sv->s_rcvd += d->len;
    sv->s_nmsg++;
}

static void server_raw_begin(struct server *sv, struct rbuf *r)
{
    char err[512] = "";
    struct wbuf w = {.n = 0};
    server_raw_close(sv);
    sv->raw_fd = raw_open(sv->s->nodes, sv->f->self, sv->f->peer, err, sizeof err);
    sv->raw_rcvd = sv->raw_bytes = sv->raw_next = sv->raw_reported = 0;
    sv->raw_every = r32(r);
    if (r->bad || sv->raw_every == 0)
        sv->raw_every = 1;
    w32(&w, sv->raw_fd < 0 ? (uint32_t)-1 : 0);
    wstr(&w, err);
    if (sv->raw_fd < 0)
        printf(PROG " server: raw UDP baseline: %s\n", err);
    server_send_ctl(sv, CTL_RAW_READY, &w);
}

static void server_ctl(struct server *sv, uint16_t src)
{
    struct fw *f = sv->f;
    struct rbuf r = {.b = f->ctl, .n = f->ctl_total, .pos = 0, .bad = false};
    struct wbuf w = {.n = 0};

    if (f->ctl_type == CTL_HELLO) {
        server_hello(sv, src, &r);
        return;
    }
    if (sv->st == S_WAIT || src != f->peer)
        return; /* left over from an earlier run */
    switch (f->ctl_type) {
    case CTL_PP_BEGIN:
        sv->pp_size = r32(&r);
        sv->pp_left = r64(&r);
        if (!r.bad && sv->pp_left)
            sv->st = S_PP;
        break;
    case CTL_STREAM:
        sv->verify = r32(&r) != 0;
        sv->s_bytes = r64(&r);
        sv->s_msgs = r64(&r);
        sv->s_ms = r32(&r);
        sv->s_rcvd = sv->s_nmsg = sv->s_bad_msgs = sv->s_bad_bytes = sv->s_order = 0;
        sv->s_crc = 0;
        sv->s_first[0] = '\0';
        sv->t_first = sv->t_last = 0;
        if (!r.bad)
            sv->st = S_STREAM;
        break;
    case CTL_RAW_BEGIN:
        server_raw_begin(sv, &r);
        break;
    case CTL_RAW_END:
        server_raw_close(sv);
        break;
    case CTL_FINISH: {
        unsigned n = all_counter_count();
        uint64_t *now = calloc(n, sizeof(uint64_t));
        if (!now)
            psp_fail_exit("out of memory");
        read_counters(f, now);
        w64(&w, sv->failures);
        w64(&w, f->stray);
        w32(&w, n);
        for (unsigned i = 0; i < n; i++)
            w64(&w, now[i] - sv->base[i]);
        free(now);
        server_send_ctl(sv, CTL_FINISH_RES, &w);
        break;
    }
    case CTL_BYE: {
        uint64_t l = 4ull * f->img->cfg.rto_max_us * 1000;
        if (l < 200000000ull)
            l = 200000000ull;
        if (l > 2000000000ull)
            l = 2000000000ull;
        sv->linger_until = mcp_now_ns() + l;
        sv->st = S_LINGER;
        break;
    }
    default:
        f->stray++;
        break;
    }
}

/*
 * Handle one received message (the caller releases it).  Returns 0 when it is dealt with,
 * 1 when it completed a control message (in f->ctl), 2 when it completed a stream.
 */
static int server_msg(struct server *sv, const struct mcp_rx_desc *d)
{
    struct fw *f = sv->f;
    if (sv->st != S_WAIT && d->src == f->peer)
        sv->last_activity = mcp_now_ns();
    if (sv->o->peer >= 0 && d->src != sv->o->peer)
        return 0;
    if (sv->st == S_PP && d->src == f->peer) {
        char msg[512];
        int rc = fw_send_buf(f, d->data, d->len);
        if (!rc)
            rc = fw_pump(f);
        if (rc) {
            fw_err_text(f, msg, sizeof msg);
            server_abort(sv, msg);
            return 0;
        }
        if (--sv->pp_left == 0) {
            printf(PROG " server: ping-pong %u B: echoed\n", sv->pp_size);
            fflush(stdout);
            sv->st = S_CTL;
        }
        return 0;
    }
    if (sv->st == S_STREAM && d->src == f->peer) {
        server_stream_msg(sv, d);
        return sv->s_rcvd >= sv->s_bytes ? 2 : 0;
    }
    int rc = ctl_feed(f, d);
    if (rc < 0 && sv->st != S_WAIT && d->src == f->peer)
        f->stray++;
    return rc == 1 ? 1 : 0;
}

/* Serve the raw baseline's datagrams; returns how many arrived. */
static int server_raw_service(struct server *sv)
{
    int n = rawbatch_recv(&sv->rb, sv->raw_fd);
    bool data = false;
    for (int i = 0; i < n; i++) {
        uint8_t *p = rawbatch_data(&sv->rb, i);
        uint32_t len = sv->rb.msg[i].msg_len;
        if (len < 8)
            continue;
        switch (mcp_get_le32(p)) {
        case RAW_PING:
            if (send(sv->raw_fd, p, len, MSG_DONTWAIT) < 0) {
                /* lost like any datagram: the client sends again */
            }
            break;
        case RAW_DATA:
            if (len < 16)
                break;
            sv->raw_rcvd++;
            sv->raw_bytes += len;
            if (get64(p + 8) + 1 > sv->raw_next)
                sv->raw_next = get64(p + 8) + 1;
            data = true;
            break;
        case RAW_FIN: {
            uint8_t tot[24];
            mcp_put_le32(tot, RAW_TOTAL);
            mcp_put_le32(tot + 4, 0);
            put64(tot + 8, sv->raw_rcvd);
            put64(tot + 16, sv->raw_bytes);
            if (send(sv->raw_fd, tot, sizeof tot, MSG_DONTWAIT) < 0) {
                /* the client repeats FIN */
            }
            break;
        }
        default:
            break;
        }
    }
    if (n > 0)
        sv->last_activity = mcp_now_ns();
    /* Credit: the highest datagram seen, once per batch when it moved on enough. */
    if (data && sv->raw_next - sv->raw_reported >= sv->raw_every) {
        uint8_t c[32];
        mcp_put_le32(c, RAW_CREDIT);
        mcp_put_le32(c + 4, 0);
        put64(c + 8, sv->raw_next);
        put64(c + 16, sv->raw_rcvd);
        put64(c + 24, sv->raw_bytes);
        if (send(sv->raw_fd, c, sizeof c, MSG_DONTWAIT) >= 0)
            sv->raw_reported = sv->raw_next;
    }
    return n;
}

static void server_print_counters(struct server *sv)
{
    unsigned n = all_counter_count();
    uint64_t *now = calloc(n, sizeof(uint64_t));
    if (!now)
        return;
    read_counters(sv->f, now);
    printf(PROG " server: NIC counters of node %u for this run (non-zero):\n", sv->f->self);
    for (unsigned i = 0; i < n; i++) {
        const char *help;
        const char *name = counter_label(i, &help);
        if (now[i] - sv->base[i])
            printf("  %-22s %14" PRIu64 "   %s\n", name, now[i] - sv->base[i], help);
    }
    free(now);
}

/* The client said goodbye: report the run. */
static void server_run_done(struct server *sv)
{
    sv->runs_done++;
    printf(PROG " server: run with node %u done: %s\n", sv->f->peer,
           sv->failures ? "ERRORS found" : "all checks passed");
    if (sv->o->counters)
        server_print_counters(sv);
    fflush(stdout);
}

static int run_server(struct fw *f, struct setup *s, const struct opts *o)
{
    struct server sv;
    memset(&sv, 0, sizeof sv);
    sv.f = f;
    sv.s = s;
    sv.o = o;
    sv.raw_fd = -1;
    sv.base = calloc(all_counter_count(), sizeof(uint64_t));
    if (!sv.base || rawbatch_init(&sv.rb, RAW_MAXDG + 1))
        psp_fail_exit("out of memory");
    f->peer = UINT16_MAX;
    const struct psp_node_addr *me = &s->nodes->node[f->self];
    char desc[512];
    describe_fw(f, s, desc, sizeof desc);
    printf(PROG " server: node %u (%s:%u) ready: %s\n", f->self, inet_ntoa(me->ip), me->port, desc);
    fflush(stdout);

    uint64_t start = mcp_now_ns();
    uint64_t wait_deadline = o->timeout_s && !o->forever ? start + o->timeout_s * 1000000000ull : 0;
    uint64_t idle_limit = 2ull * f->img->cfg.peer_timeout_ms * 1000000ull + 10000000000ull;

    for (;;) {
        uint64_t now = mcp_now_ns();
        bool fw_due = true;
        if (sv.raw_fd >= 0) {
            idle_note(&f->idle, server_raw_service(&sv) > 0, now);
            fw_due = now - sv.last_fw >= 1000000;
        }
        if (fw_due) {
            sv.last_fw = now;
            int rc = fw_pump(f);
            if (rc && sv.st != S_WAIT && sv.st != S_LINGER) {
                char msg[512];
                fw_err_text(f, msg, sizeof msg);
                server_abort(&sv, msg);
                continue;
            }
            f->err = 0;
            if (sv.st != S_WAIT && f->img->counters.peer_resets != sv.peer_resets) {
                sv.peer_resets = f->img->counters.peer_resets;
                if (sv.st != S_LINGER) {
                    server_abort(&sv, "the client restarted (connection reset)");
                    continue;
                }
            }
            struct mcp_rx_desc d;
            while (mcp_recv_peek(f->img, &d)) {
                uint16_t src = d.src;
                int what = server_msg(&sv, &d);
                mcp_recv_done(f->img);
                if (what == 2)
                    server_stream_result(&sv);
                else if (what == 1)
                    server_ctl(&sv, src);
                if (sv.raw_fd >= 0)
                    break; /* back to the raw socket soon */
            }
        }
        now = mcp_now_ns();
        if (sv.st == S_LINGER && now > sv.linger_until) {
            server_run_done(&sv);
            if (!o->forever) {
                server_raw_close(&sv);
                free(sv.base);
                free(sv.rb.buf);
                return sv.failures ? EXIT_FAIL : EXIT_OK;
            }
            server_reset(&sv);
            continue;
        }
        if (sv.st != S_WAIT && sv.st != S_LINGER && now - sv.last_activity > idle_limit) {
            char msg[128];
            snprintf(msg, sizeof msg, "nothing heard for %.0f s: the client is gone",
                     (double)idle_limit / 1e9);
            server_abort(&sv, msg);
            continue;
        }
        if (sv.st == S_WAIT && wait_deadline && now > wait_deadline) {
            psp_fail_exit("no client run within --timeout %" PRIu64 " s", o->timeout_s);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Main                                                                                     */
/* ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    struct opts o;
    struct setup s;
    struct fw *f;
    char err[512];

    psp_log_init(PROG);
    psp_tool_init(PROG, usage);
    setvbuf(stdout, NULL, _IOLBF, 1 << 16);
    parse_options(&o, argc, argv);
    memset(&s, 0, sizeof s);

    /* nodes */
    const char *nodes_file = o.nodes_file ? o.nodes_file : psp_setting_str("PSP_NODES_FILE");
    uint64_t port;
    if (psp_setting_u64("PSP_UDP_PORT", 1, 65534, &port, err, sizeof err))
        config_error("%s", err);
    if (!nodes_file || !*nodes_file)
        psp_usage_error("no nodes file: give -N FILE or set PSP_NODES_FILE (test/cluster/"
                        "psport-cluster up 2 writes one)");
    s.nodes = calloc(1, sizeof(*s.nodes));
    if (!s.nodes)
        psp_fail_exit("out of memory");
    int rc = psp_nodes_load(nodes_file, (uint16_t)port, s.nodes, err, sizeof err);
    if (rc)
        config_error("nodes file %s: %s", nodes_file, err);

    long node = o.node >= 0 ? o.node : (o.server ? 1 : 0);
    if (node >= s.nodes->count || !s.nodes->node[node].present)
        config_error("node %ld is not in the nodes file %s", node, nodes_file);
    long peer = o.peer;
    if (peer < 0 && !o.server) {
        for (long i = 0; i < s.nodes->count && peer < 0; i++)
            if (i != node && s.nodes->node[i].present)
                peer = i;
        if (peer < 0)
            config_error("the nodes file %s has no node besides %ld: " PROG " needs two",
                         nodes_file, node);
    }
    if (peer >= 0) {
        if (peer == node)
            psp_usage_error("--peer %ld is this node itself", peer);
        if (peer >= s.nodes->count || !s.nodes->node[peer].present)
            config_error("peer node %ld is not in the nodes file %s", peer, nodes_file);
    }
    for (long i = 0; i < s.nodes->count; i++)
        if (s.nodes->node[i].present && s.nodes->node[i].port == 65535)
            config_error("node %ld uses UDP port 65535: the raw baseline needs port + 1", i);
    s.node = (uint16_t)node;

    /* link */
    s.link_kind = o.link ? o.link : psp_setting_str("PSP_LINK");
    if (strcmp(s.link_kind, "udp") && strcmp(s.link_kind, "eth"))
        config_error("PSP_LINK=%s is not a link kind: use udp or eth", s.link_kind);
    s.ifname = o.ifname ? o.ifname : psp_setting_str("PSP_LINK_IF");
    if (s.ifname && !*s.ifname)
        s.ifname = NULL;
    if (mcp_fault_from_settings(&s.fault, err, sizeof err))
        config_error("%s", err);

    f = calloc(1, sizeof(*f));
    if (!f)
        psp_fail_exit("out of memory");
    fw_open(f, &s, &o);
    if (o.server) {
        f->server = true;
        rc = run_server(f, &s, &o);
    } else {
        f->peer = (uint16_t)peer;
        if (o.timeout_s)
            f->deadline_ns = mcp_now_ns() + o.timeout_s * 1000000000ull;
        rc = run_client(f, &s, &o);
    }
    lanai_close(f->link);
    free(f->img);
    free(f);
    free(s.nodes);
    return rc;
}
