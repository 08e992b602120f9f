/*
 * nodes.h — the cluster description: node id -> address.
 *
 * A nodes file has one node per line, '#' starts a comment:
 *     <id> <ipv4>[:<udp port>] [<mac aa:bb:cc:dd:ee:ff>] [<interface>]
 * Ids are 0 .. 65534, each at most once. Without a port the default PSP_UDP_PORT is used.
 * Without a nodes file, node 0 on 127.0.0.1 is the whole (single-node) cluster.
 */
#ifndef PSPORT_MCP_NODES_H
#define PSPORT_MCP_NODES_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define PSP_NODES_MAX 1024

struct psp_node_addr {
    uint8_t present; /* this id is described */
    uint8_t has_mac;
    uint16_t port; /* host order */
    struct in_addr ip;
    uint8_t mac[6];
    char ifname[16]; /* optional interface name ("" if none) */
};

struct psp_nodes {
    uint16_t count; /* highest id + 1 */
    struct psp_node_addr node[PSP_NODES_MAX];
};

/* Parse nodes-file text. Returns 0, or -EINVAL with "line N: what is wrong" in err. */
int psp_nodes_parse(const char *text, uint16_t default_port, struct psp_nodes *out, char *err,
                    size_t errlen);

/* Read and parse a nodes file. Returns 0, -errno (cannot read; message in err) or -EINVAL. */
int psp_nodes_load(const char *path, uint16_t default_port, struct psp_nodes *out, char *err,
                   size_t errlen);

/* The single-node cluster: node 0 on 127.0.0.1:default_port. */
void psp_nodes_single(struct psp_nodes *out, uint16_t default_port);

#endif
