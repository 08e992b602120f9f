/*
 * settings.c — the one table of PSP_* environment settings, and their parsers.
 *
 * To add a setting: add one row to `table` below, in the block of its layer (keep the
 * layers together: psp_settings_print groups rows by layer in order of first appearance).
 */
#include "settings.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
static const struct psp_setting table[] = {
    /* log */
    {"PSP_DEBUG",            "0",      "log",  "log level: 0 error 1 warn 2 info 3 debug 4 trace"},

    /* link */
    {"PSP_LINK",             "udp",    "link", "link kind: udp | eth"},
    {"PSP_LINK_IF",          "",       "link", "eth interface; empty = the one with our MAC"},
    {"PSP_NODES_FILE",       "",       "link", "nodes file; empty = one node on 127.0.0.1"},
    {"PSP_UDP_PORT",         "18360",  "link", "UDP port of the udp link"},
    {"PSP_UDP_GSO",          "1",      "link", "udp link: send frames over the MTU as one GSO write of segments (0: IP fragments)"},
    {"PSP_UDP_RING",         "1",      "link", "udp link: read datagrams from a packet receive ring mapped into memory when allowed (root); 0: with recvmmsg"},
    {"PSP_UDP_ETH",          "1",      "link", "udp link: frames under the MTU to nodes whose MAC the nodes file gives go as raw Ethernet frames, past IP and UDP (needs the ring; 0: all as datagrams)"},
    {"PSP_UDP_PACK",         "1",      "link", "udp link: consecutive small frames to one node share a datagram under the MTU (0: a datagram each)"},
    {"PSP_UDP_SEGMENT",      "0",      "link", "udp link: segment bytes for GSO (0: interface MTU - 28)"},
    {"PSP_ETH_RING",         "1",      "link", "eth link: read frames from a receive ring mapped into memory (0: with recvmmsg)"},
    {"PSP_LINK_LOSS",        "0",      "link", "injected: probability a frame is dropped"},
    {"PSP_LINK_DUP",         "0",      "link", "injected: probability a frame is duplicated"},
    {"PSP_LINK_CORRUPT",     "0",      "link", "injected: probability a frame is corrupted"},
    {"PSP_LINK_SEED",        "1",      "link", "seed of the fault injection"},

    /* mcp (the firmware) */
    {"PSP_WINDOW",           "auto",   "mcp",  "RDP send window per peer, frames (1..64); auto: 8, more for small frames so it holds 96 KiB (64 on eth at MTU 1500)"},
    {"PSP_FRAME_SIZE",       "65503",  "mcp",  "payload bytes per NIC frame (capped to what one link write carries: 64384 on udp at MTU 1500)"},
    {"PSP_CONTEXTS",         "64",     "mcp",  "NIC contexts (attached processes)"},
    {"PSP_SEND_SLOTS",       "auto",   "mcp",  "send slots per context, a power of two; auto: 2 windows, at least 32"},
    {"PSP_RECV_SLOTS",       "auto",   "mcp",  "NIC receive slots, a power of two; auto: 4 windows, at least 128"},
    {"PSP_HOSTQ_SLOTS",      "32",     "mcp",  "host receive queue slots, a power of two (few: a small ring stays in cache)"},
    {"PSP_MAX_NODES",        "256",    "mcp",  "largest number of nodes in the cluster"},
    {"PSP_RTO_US",           "2000",   "mcp",  "least retransmission timeout (above it the timeout follows the measured round trip)"},
    {"PSP_RTO_MAX_US",       "100000", "mcp",  "largest retransmission timeout (backoff)"},
    {"PSP_ACK_DELAY_US",     "20",     "mcp",  "delay before a standalone ACK"},
    {"PSP_NACK_INTERVAL_US", "200",    "mcp",  "least time between NACKs to one peer"},
    {"PSP_NOBUF_BACKOFF_US", "50",     "mcp",  "sender pause after a no-buffer NACK"},
    {"PSP_PEER_TIMEOUT_MS",  "5000",   "mcp",  "silence before a peer is declared dead"},

    /* psid (the NIC provider) */
    {"PSP_NODE_ID",          "0",      "psid", "this node's id in the nodes file"},
    {"PSP_PSID_SOCKET",      "/run/psport/psid.sock",
                                       "psid", "psid's UNIX socket (clients connect here)"},
    {"PSP_PSID_USERS",       "",       "psid", "users who may attach and spawn (names/uids); empty = any"},
    {"PSP_PSID_MAX_CLIENTS", "64",     "psid", "largest number of attached client processes"},
    {"PSP_PSID_ALIVE_MS",    "250",    "psid", "interval of alive/load messages to the other psids"},
    {"PSP_PSID_DEAD_MS",     "2000",   "psid", "a node silent this long is declared dead"},
    {"PSP_NIC_IDLE_US",      "500",    "psid", "psid runs the NIC after this long unpolled while frames wait to be sent"},
    {"PSP_NIC_QUIET_US",     "5000",   "psid", "psid runs the NIC after this long unpolled when nothing waits to be sent"},
    {"PSP_AREA_PORTS",       "1024",   "psid", "message area: ports per node (numbers 1 .. N-1)"},
    {"PSP_AREA_MESSAGES",    "8192",   "psid", "message area: message descriptors per node"},
    {"PSP_AREA_FRAGMENTS",   "16384",  "psid", "message area: fragments (one NIC frame each)"},
    {"PSP_AREA_RINGS",       "64",     "psid", "message area: local rings, one per sending and receiving port pair (0: none)"},
    {"PSP_AREA_RING_BYTES",  "262144", "psid", "message area: bytes of each local ring (a power of two, 1024 or more); a ring message takes at most a quarter, 24 bytes of it its header (the kernel module's area: the rings get at most a quarter of it, smaller rings when they need more)"},
    {"PSP_DEVICE",           "",       "pulc", "kernel provider device; empty = /dev/psport if it exists, else psid; none = psid"},
    {"PSP_SPIN_US",          "50",     "pulc", "waiting: poll this long before yielding"},
    {"PSP_YIELD_US",         "2000",   "pulc", "waiting: then poll and yield this long before sleeping"},
    {"PSP_YIELD_MOVE",       "1",      "pulc", "waiting: when yields keep handing the CPU to another task, move once to the next CPU of the affinity mask (at most every 20 ms, less often while that does not help; 0: never)"},
    {"PSP_PREFAULT",         "1",      "pulc", "at attach, map the NIC image's pages this process will use and touch the link's receive ring, not during its first large messages (0: as they are touched)"},
    {"PSP_LOCAL_DIRECT",     "32768",  "pulc", "local messages above this size that no ring takes are copied once by the receiver"},
    {"PSP_LOCAL_RING_MAX",   "65536",  "pulc", "local messages with this many bytes or fewer (extra header included) pass a lock-free ring, up to what a ring takes (PSP_AREA_RING_BYTES) (0: never)"},
    {"PSP_WAKE_FENCE",       "light",  "pulc", "local sends: light = only a receiver going to sleep fences every CPU (membarrier), full = a full fence at every send (also where the kernel lacks the barrier)"},
    {"PSP_TX_AT_POST",       "1",      "pulc", "psid's NIC: a send to another node whose way is idle (nothing queued or unacknowledged) leaves at its post if the NIC is free and no other post did in the last 20 us with no progress pass since (0: at the next pass)"},
    {"PSP_PARTITION",        "",       "pulc", "nodes a job may use (ids, 0-2, hosts, IPs, n[1-4]); empty = PSP_HOSTFILE, Slurm, PBS"},
    {"PSP_HOSTFILE",         "",       "pulc", "partition file, one host per line; empty = SLURM_JOB_NODELIST, then PBS_NODEFILE"},

    /* mpi (ch_psport, the MPICH channel) */
    {"PSP_EAGER_MAX",        "262144", "mpi",  "largest MPI message sent eagerly (bytes); MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE, when set, wins"},
    {"PSP_RNDV_CHUNK",       "1073741824", "mpi", "rendezvous to another node: bytes the receiver opens to the sender at a time (4096..4294967295); a longer message moves in pieces of this size"},
};
/* clang-format on */

#define TABLE_LEN (sizeof table / sizeof table[0])

const struct psp_setting *psp_settings_table(unsigned *count)
{
    if (count)
        *count = (unsigned)TABLE_LEN;
    return table;
}

const struct psp_setting *psp_setting_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < TABLE_LEN; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

/* The environment's value of s, or NULL when unset or empty. */
static const char *env_value(const struct psp_setting *s)
{
    const char *v = getenv(s->name);
    return v && *v ? v : NULL;
}

static const struct psp_setting *find_or_abort(const char *name)
{
    const struct psp_setting *s = psp_setting_find(name);
    if (!s) {
        fprintf(stderr,
                "psport: internal error: setting %s is not in the settings table; "
                "add a row for it to common/settings.c\n",
                name ? name : "(null)");
        abort();
    }
    return s;
}

const char *psp_setting_str(const char *name)
{
    const struct psp_setting *s = find_or_abort(name);
    const char *v = env_value(s);
    return v ? v : s->def;
}

enum parse_result { PARSE_OK, PARSE_SYNTAX, PARSE_RANGE };

/* Decimal digits, then at most one k/m/g suffix (any case, powers of 1024), nothing else. */
static enum parse_result parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!text || !*text)
        return PARSE_SYNTAX;
    const char *p = text;
    uint64_t v = 0;
    bool overflow = false;
    if (*p < '0' || *p > '9')
        return PARSE_SYNTAX;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
    }
    unsigned shift = 0;
    switch (*p) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        return PARSE_SYNTAX;
    }
    if (shift) {
        if (p[1] != '\0')
            return PARSE_SYNTAX;
        if (v > (UINT64_MAX >> shift))
            overflow = true;
        else
            v <<= shift;
    }
    if (overflow || v < min || v > max)
        return PARSE_RANGE;
    *out = v;
    return PARSE_OK;
}

int psp_parse_u64(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (parse_u64(text, min, max, &v) != PARSE_OK)
        return -EINVAL;
    *out = v;
    return 0;
}

int psp_setting_u64(const char *name, uint64_t min, uint64_t max, uint64_t *out, char *err,
                    size_t errlen)
{
    const char *text = psp_setting_str(name);
    uint64_t v;
    switch (parse_u64(text, min, max, &v)) {
    case PARSE_OK:
        *out = v;
        return 0;
    case PARSE_RANGE:
        if (err && errlen)
            snprintf(err, errlen, "%s=%s is out of range %llu..%llu", name, text,
                     (unsigned long long)min, (unsigned long long)max);
        return -EINVAL;
    case PARSE_SYNTAX:
    default:
        if (err && errlen)
            snprintf(err, errlen,
                     "%s=%s is not a number: give a decimal integer in %llu..%llu, "
                     "optionally with a k, m or g suffix (powers of 1024)",
                     name, text, (unsigned long long)min, (unsigned long long)max);
        return -EINVAL;
    }
}

/* A plain decimal: digits with at most one '.', at least one digit, in [0, 1]. */
static bool parse_prob(const char *text, double *out)
{
    int digits = 0, dots = 0;
    for (const char *p = text; *p; p++) {
        if (*p >= '0' && *p <= '9')
            digits++;
        else if (*p == '.' && ++dots == 1)
            continue;
        else
            return false;
    }
    if (digits == 0)
        return false;
    /* Evaluate by hand so the C locale's decimal point does not matter. */
    double v = 0, scale = 1;
    bool frac = false;
    for (const char *p = text; *p; p++) {
        if (*p == '.') {
            frac = true;
            continue;
        }
        if (frac) {
            scale /= 10;
            v += (*p - '0') * scale;
        } else {
            v = v * 10 + (*p - '0');
        }
    }
    if (v > 1.0)
        return false;
    *out = v;
    return true;
}

int psp_setting_prob(const char *name, double *out, char *err, size_t errlen)
{
    const char *text = psp_setting_str(name);
    double v;
    if (!parse_prob(text, &v)) {
        if (err && errlen)
            snprintf(err, errlen, "%s=%s is not a probability: give a decimal in 0..1 (e.g. 0.01)",
                     name, text);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* Width of a value as printed: empty strings are shown as "". */
static const char *shown(const char *v)
{
    return *v ? v : "\"\"";
}

void psp_settings_print(FILE *f)
{
    int wname = (int)strlen("NAME"), wval = (int)strlen("VALUE"), wdef = (int)strlen("DEFAULT");
    bool any_env = false;
    for (size_t i = 0; i < TABLE_LEN; i++) {
        const char *env = env_value(&table[i]);
        int lname = (int)strlen(table[i].name);
        int lval = (int)strlen(shown(env ? env : table[i].def)) + (env ? 2 : 0);
        int ldef = (int)strlen(shown(table[i].def));
        wname = lname > wname ? lname : wname;
        wval = lval > wval ? lval : wval;
        wdef = ldef > wdef ? ldef : wdef;
        any_env |= env != NULL;
    }

    fprintf(f, "%-*s  %-*s  %-*s  %s\n", wname, "NAME", wval, "VALUE", wdef, "DEFAULT", "HELP");
    /* Layers in order of first appearance; each row printed under the first row of its layer. */
    for (size_t i = 0; i < TABLE_LEN; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(table[j].layer, table[i].layer) == 0;
        if (seen)
            continue;
        fprintf(f, "[%s]\n", table[i].layer);
        for (size_t k = i; k < TABLE_LEN; k++) {
            const struct psp_setting *s = &table[k];
            if (strcmp(s->layer, table[i].layer) != 0)
                continue;
            const char *env = env_value(s);
            char val[512];
            snprintf(val, sizeof val, "%s%s", shown(env ? env : s->def), env ? " *" : "");
            fprintf(f, "%-*s  %-*s  %-*s  %s\n", wname, s->name, wval, val, wdef, shown(s->def),
                    s->help);
        }
    }
    if (any_env)
        fprintf(f, "* = set in the environment\n");
}
