/*
 * psinfo — what the node's NIC provider is and does: version and provider (default),
 * settings (-c), NIC counters (-n), attached contexts and open ports (-p), the message area's
 * usage and counters (-a).  Reads through psid: INFO, and MAP for read-only views of the NIC
 * image and the message area (no context is taken) — or, where the kernel module provides the
 * NIC (PSP_DEVICE, /dev/psport), through its device: INFO and read-only mappings.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "mcp.h"
#include "lring.h"
#include "marea.h"
#include "mcp_host.h"
#include "psk_client.h"
#include "psk_dev.h"
#include "psport_abi.h"
#include "settings.h"

#define PROG "psinfo"

static void usage(FILE *f)
{
    fprintf(f, "Usage: " PROG " [-c | -n | -p | -a]\n"
               "Show the psport NIC provider of this node: the kernel module's device\n"
               "(PSP_DEVICE, default /dev/psport if it exists), else psid (PSP_PSID_SOCKET).\n\n"
               "  (no option)        version, provider, node, link, slot size, contexts\n"
               "  -c, --config       the PSP_* settings with their current values\n"
               "  -n, --counters     the NIC's counters\n"
               "  -p, --processes    attached contexts (index, owner pid, generation, busy "
               "slots)\n"
               "                     and open ports (number, kind, owner pid, queued)\n"
               "  -a, --area         the message area: messages and fragments in use, "
               "counters\n"
               "  -h, --help         show this help\n");
}

static const char *state_name(uint32_t s)
{
    switch (s) {
    case MCP_CTX_ATTACHED:
        return "attached";
    case MCP_CTX_CLOSING:
        return "closing";
    default:
        return "free";
    }
}

/* The message area: usage of its tables and its counters (a snapshot read without its lock). */
static void print_area(struct pulc_area *a)
{
    uint32_t msgs = 0, frags = 0, ports = 0;
    pulc_area_usage(a, &msgs, &frags);
    for (uint32_t p = 1; p < a->cfg.ports; p++)
        ports += pulc_port_at(a, p)->state == PULC_PORT_OPEN;
    printf("%-16s %20s  %s\n", "item", "value", "meaning");
    printf("%-16s %20u  %s\n", "ports_open", ports, "ports open now");
    printf("%-16s %20u  %s\n", "ports", a->cfg.ports - 1, "port numbers (PSP_AREA_PORTS - 1)");
    printf("%-16s %20u  %s\n", "msgs_used", msgs, "message descriptors in use");
    printf("%-16s %20u  %s\n", "msgs_free", a->msgs_free, "message descriptors on the free list");
    printf("%-16s %20u  %s\n", "messages", a->cfg.messages,
           "message descriptors (PSP_AREA_MESSAGES)");
    printf("%-16s %20u  %s\n", "frags_used", frags, "fragments in use");
    printf("%-16s %20u  %s\n", "frags_free", a->frags_free, "fragments on the free list");
    printf("%-16s %20u  %s\n", "fragments", a->cfg.fragments, "fragments (PSP_AREA_FRAGMENTS)");
    printf("%-16s %20u  %s\n", "frag_size", a->cfg.frag_size, "bytes per fragment");
    printf("%-16s %20u  %s\n", "rings_used", pulc_ring_used(a), "local rings open now");
    printf("%-16s %20u  %s\n", "rings", a->cfg.rings, "local rings (PSP_AREA_RINGS)");
    printf("%-16s %20u  %s\n", "ring_bytes", a->cfg.ring_bytes,
           "bytes per local ring (PSP_AREA_RING_BYTES)");
    uint32_t waiters = 0;
    for (unsigned c = 0; c < PULC_AREA_CTXS; c++)
        waiters += a->net_waiters[c];
    printf("%-16s %20u  %s\n", "net_waiters", waiters,
           "client threads asleep until something arrives (psid's NIC thread serves them)");
    printf("%-16s %20llu  %s\n", "lock_recoveries", (unsigned long long)a->lock_recoveries,
           "NIC locks taken over from a dead holder");
#define PRINT_COUNTER(name, help)                                                                  \
    printf("%-16s %20llu  %s\n", #name, (unsigned long long)a->name, help);
    PULC_AREA_COUNTERS(PRINT_COUNTER)
#undef PRINT_COUNTER
}

/* Open ports: number, kind, owner, queued messages, totals. */
static void print_ports(struct pulc_area *a)
{
    static const char *kinds[] = {"?", "D", "S", "M"};
    printf("\n%-6s %-4s %-10s %-7s %-10s %-12s %-10s %s\n", "port", "kind", "pid", "queued",
           "msgs_in", "bytes_in", "msgs_out", "bytes_out");
    for (uint32_t p = 1; p < a->cfg.ports; p++) {
        struct pulc_port *pt = pulc_port_at(a, p);
        if (pt->state != PULC_PORT_OPEN)
            continue;
        printf("%-6u %-4s %-10d %-7u %-10llu %-12llu %-10llu %llu\n", p,
               kinds[pt->kind < 4 ? pt->kind : 0], pt->owner_pid, pt->qlen,
               (unsigned long long)pt->msgs_in, (unsigned long long)pt->bytes_in,
               (unsigned long long)pt->msgs_out, (unsigned long long)pt->bytes_out);
    }
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"config", no_argument, NULL, 'c'},    {"counters", no_argument, NULL, 'n'},
        {"processes", no_argument, NULL, 'p'}, {"area", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0}};
    int mode = 0, o;
    while ((o = getopt_long(argc, argv, "cnpah", lo, NULL)) != -1) {
        switch (o) {
        case 'c':
        case 'n':
        case 'p':
        case 'a':
            mode = o;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "Try '" PROG " --help'.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\nTry '" PROG " --help'.\n", argv[optind]);
        return 2;
    }
    if (mode == 'c') {
        psp_settings_print(stdout);
        return 0;
    }

    char err[512] = "";
    struct psk_info in;
    memset(&in, 0, sizeof in);
    int fds[2] = {-1, -1};
    int rc;
    const char *dev = pulc_dev_path();
    const char *path = dev ? dev : psp_setting_str("PSP_PSID_SOCKET");
    if (dev) {
        /* the kernel module: INFO and read-only mappings of the same descriptor */
        int fd = open(dev, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, PROG ": cannot open %s: %s (is the psport module loaded?)\n", dev,
                    strerror(errno));
            return 1;
        }
        if (pulc_dev_info(fd, dev, &in, err, sizeof err) != 0) {
            fprintf(stderr, PROG ": %s\n", err);
            close(fd);
            return 1;
        }
        fds[0] = fd;
        fds[1] = dup(fd);
    } else {
        int sock = pulc_psk_connect(path, err, sizeof err);
        if (sock < 0) {
            fprintf(stderr, PROG ": %s\n", err);
            return 1;
        }
        if (mode == 0)
            rc = pulc_psk_call(sock, PSK_OP_INFO, PSK_ABI_VERSION, NULL, 0, &in, sizeof in, NULL,
                               NULL, 0, err, sizeof err);
        else
            rc = pulc_psk_call(sock, PSK_OP_MAP, PSK_ABI_VERSION, NULL, 0, &in, sizeof in, NULL,
                               fds, 2, err, sizeof err);
        close(sock);
        if (rc) {
            fprintf(stderr, PROG ": %s\n", err);
            return 1;
        }
    }
    if (mode == 0) {
        char link[sizeof in.link_kind + 1];
        memcpy(link, in.link_kind, sizeof in.link_kind);
        link[sizeof in.link_kind] = '\0';
        printf("psport %s\n", PACKAGE_VERSION);
        if (dev)
            printf("provider       kernel module (device %s, ABI %u, firmware ABI %u)\n", path,
                   in.abi_version, in.mcp_abi_version);
        else
            printf("provider       psid (socket %s, ABI %u, firmware ABI %u)\n", path,
                   in.abi_version, in.mcp_abi_version);
        printf("node           %u of at most %u\n", in.node_id, in.max_nodes);
        printf("link           %s%s%s\n", link,
               in.flags & PSK_INFO_RX_RING ? ", arrivals read from a receive ring" : "",
               in.flags & PSK_INFO_UDP_ETH ? ", frames under the MTU as Ethernet frames" : "");
        printf("slot size      %u bytes\n", in.slot_size);
        printf("window         %u frames to a peer; slots %u send per context, %u receive, %u "
               "host queue\n",
               in.window, in.send_slots, in.recv_slots, in.hostq_slots);
        printf("contexts       %u used of %u\n", in.contexts_used, in.contexts);
        printf("max clients    %u\n", in.max_clients);
        printf("image          %llu bytes, message area %llu bytes\n",
               (unsigned long long)in.image_size, (unsigned long long)in.area_size);
        return 0;
    }

    if (fds[0] < 0 || fds[1] < 0) {
        fprintf(stderr, PROG ": psid's reply to MAP lacks the image or area descriptor\n");
        return 1;
    }
    struct mcp_image *img =
        mmap(NULL, in.image_size, PROT_READ, MAP_SHARED, fds[0], (off_t)PSK_MMAP_IMAGE);
    close(fds[0]);
    struct pulc_area *area =
        mmap(NULL, in.area_size, PROT_READ, MAP_SHARED, fds[1], dev ? (off_t)PSK_MMAP_AREA : 0);
    close(fds[1]);
    if (dev && area != MAP_FAILED && area->magic == 0 && mode != 'n') {
        printf("the message area of %s is not formatted yet (no process attached so far)\n", dev);
        return 0;
    }
    if (area == MAP_FAILED) {
        fprintf(stderr, PROG ": cannot map the message area of %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (area->magic != PULC_AREA_MAGIC || area->version != PULC_AREA_VERSION ||
        area->size != in.area_size) {
        fprintf(stderr,
                PROG ": the message area is version %u (magic 0x%08x, %llu bytes), psinfo speaks "
                     "version %u (%llu bytes): use the psinfo of the psport the provider runs\n",
                area->version, area->magic, (unsigned long long)area->size, PULC_AREA_VERSION,
                (unsigned long long)in.area_size);
        return 1;
    }
    uint32_t found = 0;
    if (img == MAP_FAILED) {
        fprintf(stderr, PROG ": cannot map the NIC image: %s\n", strerror(errno));
        return 1;
    }
    if (mcp_image_check(img, in.image_size, &found)) {
        fprintf(stderr,
                PROG ": the NIC image is firmware ABI version %u, psinfo speaks %u: use the "
                     "psinfo of the psport psid runs\n",
                found, MCP_ABI_VERSION);
        return 1;
    }
    if (mode == 'n') {
        printf("%-16s %20s  %s\n", "counter", "value", "meaning");
        for (unsigned i = 0; i < mcp_counter_count(); i++)
            printf("%-16s %20llu  %s\n", mcp_counter_name(i),
                   (unsigned long long)mcp_counter_value(img, i), mcp_counter_help(i));
        printf("%-16s %20llu  %s\n", "polls", (unsigned long long)img->polls,
               "firmware passes (all executors)");
    } else if (mode == 'a') {
        print_area(area);
    } else {
        printf("%-5s %-10s %-10s %-10s %s\n", "ctx", "pid", "generation", "state", "busy");
        for (unsigned c = 0; c < img->cfg.contexts; c++) {
            struct mcp_context *x = mcp_ctx(img, c);
            uint32_t st = MCP_LOAD_ACQ(&x->state);
            if (st == MCP_CTX_FREE)
                continue;
            printf("%-5u %-10u %-10u %-10s %u\n", c, x->owner, x->generation, state_name(st),
                   mcp_send_busy(img, c));
        }
    }
    if (mode == 'p')
        print_ports(area);
    munmap(area, in.area_size);
    munmap(img, in.image_size);
    return 0;
}
