/*
 * psinfo — what the node's NIC provider is and does: version and provider (default),
 * settings (-c), NIC counters (-n), attached contexts (-p).  Reads through psid: INFO, and
 * MAP for a read-only view of the NIC image (no context is taken).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "mcp.h"
#include "mcp_host.h"
#include "psk_client.h"
#include "psport_abi.h"
#include "settings.h"

#define PROG "psinfo"

static void usage(FILE *f)
{
    fprintf(f, "Usage: " PROG " [-c | -n | -p]\n"
               "Show the psport NIC provider of this node (psid at PSP_PSID_SOCKET).\n\n"
               "  (no option)        version, provider, node, link, slot size, contexts\n"
               "  -c, --config       the PSP_* settings with their current values\n"
               "  -n, --counters     the NIC's counters\n"
               "  -p, --processes    attached contexts: index, owner pid, generation, busy "
               "slots\n"
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

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"config", no_argument, NULL, 'c'},
                                       {"counters", no_argument, NULL, 'n'},
                                       {"processes", no_argument, NULL, 'p'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    int mode = 0, o;
    while ((o = getopt_long(argc, argv, "cnph", lo, NULL)) != -1) {
        switch (o) {
        case 'c':
        case 'n':
        case 'p':
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
    const char *path = psp_setting_str("PSP_PSID_SOCKET");
    int sock = pulc_psk_connect(path, err, sizeof err);
    if (sock < 0) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    struct psk_info in;
    memset(&in, 0, sizeof in);
    int fd = -1;
    int rc;
    if (mode == 0)
        rc = pulc_psk_call(sock, PSK_OP_INFO, PSK_ABI_VERSION, NULL, 0, &in, sizeof in, NULL, NULL,
                           0, err, sizeof err);
    else
        rc = pulc_psk_call(sock, PSK_OP_MAP, PSK_ABI_VERSION, NULL, 0, &in, sizeof in, NULL, &fd, 1,
                           err, sizeof err);
    close(sock);
    if (rc) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (mode == 0) {
        char link[sizeof in.link_kind + 1];
        memcpy(link, in.link_kind, sizeof in.link_kind);
        link[sizeof in.link_kind] = '\0';
        printf("psport %s\n", PACKAGE_VERSION);
        printf("provider       psid (socket %s, ABI %u, firmware ABI %u)\n", path, in.abi_version,
               in.mcp_abi_version);
        printf("node           %u of at most %u\n", in.node_id, in.max_nodes);
        printf("link           %s\n", link);
        printf("slot size      %u bytes\n", in.slot_size);
        printf("contexts       %u used of %u\n", in.contexts_used, in.contexts);
        printf("max clients    %u\n", in.max_clients);
        printf("image          %llu bytes, message area %llu bytes\n",
               (unsigned long long)in.image_size, (unsigned long long)in.area_size);
        return 0;
    }

    if (fd < 0) {
        fprintf(stderr, PROG ": psid's reply to MAP lacks the image descriptor\n");
        return 1;
    }
    struct mcp_image *img = mmap(NULL, in.image_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
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
    munmap(img, in.image_size);
    return 0;
}
