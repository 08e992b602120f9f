/*
 * udp_eth.c — the udp link's link frames to nodes on the same Ethernet (see udp_eth.h).
 */
#include "udp_eth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/virtio_net.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mcp_wire.h"

_Static_assert(sizeof(struct virtio_net_hdr) == UDP_ETH_VNET, "vnet header size");

static const uint8_t hello_magic[UDP_ETH_HELLO_LEN] = {'P', 'H', 'e', 'l', 'l', 'o', 0, 1};

int udp_eth_iface(struct in_addr ip, int *ifindex, uint8_t mac[6])
{
    struct ifaddrs *ifs;
    char name[IF_NAMESIZE] = "";
    int rc = -ENODEV;
    if (getifaddrs(&ifs) != 0)
        return -ENODEV;
    for (struct ifaddrs *a = ifs; a && !name[0]; a = a->ifa_next)
        if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET &&
            ((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr == ip.s_addr)
            snprintf(name, sizeof name, "%s", a->ifa_name);
    for (struct ifaddrs *a = ifs; a && name[0] && rc; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_PACKET || strcmp(a->ifa_name, name) != 0)
            continue;
        const struct sockaddr_ll *ll = (const struct sockaddr_ll *)a->ifa_addr;
        static const uint8_t zero[6];
        if (ll->sll_hatype != ARPHRD_ETHER || ll->sll_halen != 6 ||
            memcmp(ll->sll_addr, zero, 6) == 0)
            break; /* loopback and the like: no MACs to send to */
        *ifindex = ll->sll_ifindex;
        memcpy(mac, ll->sll_addr, 6);
        rc = 0;
    }
    freeifaddrs(ifs);
    return rc;
}

static uint32_t mac_hash(const uint8_t mac[6])
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 6; i++)
        h = (h ^ mac[i]) * 16777619u;
    return h;
}

int udp_eth_setup(struct udp_eth *e, const struct psp_nodes *nodes, uint16_t me)
{
    memset(e, 0, sizeof *e);
    const struct psp_node_addr *self = &nodes->node[me];
    int ifindex;
    if (udp_eth_iface(self->ip, &ifindex, e->mac) != 0)
        return 0;
    unsigned peers = 0;
    for (unsigned i = 0; i < nodes->count; i++) {
        const struct psp_node_addr *n = &nodes->node[i];
        peers += i != me && n->present && n->has_mac && memcmp(n->mac, e->mac, 6) != 0 &&
                 n->ip.s_addr != self->ip.s_addr;
    }
    if (!peers)
        return 0;
    uint32_t slots = 16;
    while (slots < 2 * peers)
        slots <<= 1;
    e->nodes = nodes->count;
    e->known = calloc(nodes->count, 1);
    e->ok = calloc(nodes->count, 1);
    e->udp_run = calloc(nodes->count, 1);
    e->hdr = calloc(nodes->count, sizeof *e->hdr);
    e->hash = calloc(slots, sizeof *e->hash);
    if (!e->known || !e->ok || !e->udp_run || !e->hdr || !e->hash) {
        udp_eth_free(e);
        return -ENOMEM;
    }
    e->hash_mask = slots - 1;
    for (unsigned i = 0; i < nodes->count; i++) {
        const struct psp_node_addr *n = &nodes->node[i];
        if (i == me || !n->present || !n->has_mac || memcmp(n->mac, e->mac, 6) == 0 ||
            n->ip.s_addr == self->ip.s_addr)
            continue;
        e->known[i] = 1;
        uint8_t *h = e->hdr[i] + UDP_ETH_VNET; /* the vnet header stays zero */
        memcpy(h, n->mac, 6);
        memcpy(h + 6, e->mac, 6);
        h[12] = (uint8_t)(UDP_ETH_TYPE >> 8);
        h[13] = (uint8_t)UDP_ETH_TYPE;
        uint32_t k = mac_hash(n->mac) & e->hash_mask;
        while (e->hash[k]) /* two nodes with one MAC: the first is found */
            k = (k + 1) & e->hash_mask;
        e->hash[k] = (uint16_t)(i + 1);
    }
    e->to.sll_family = AF_PACKET;
    e->to.sll_protocol = htons(UDP_ETH_TYPE);
    e->to.sll_ifindex = ifindex;
    e->to.sll_halen = 6;
    e->on = 1;
    return 0;
}

void udp_eth_free(struct udp_eth *e)
{
    free(e->known);
    free(e->ok);
    free(e->udp_run);
    free(e->hdr);
    free(e->hash);
    e->known = e->ok = e->udp_run = NULL;
    e->hdr = NULL;
    e->hash = NULL;
    e->on = 0;
    e->oks = 0;
}

int udp_eth_node_of(const struct udp_eth *e, const uint8_t mac[6])
{
    if (!e->hash)
        return -1;
    for (uint32_t h = mac_hash(mac) & e->hash_mask; e->hash[h]; h = (h + 1) & e->hash_mask)
        if (memcmp(e->hdr[e->hash[h] - 1] + UDP_ETH_VNET, mac, 6) == 0)
            return e->hash[h] - 1;
    return -1;
}

int udp_eth_is_hello(const uint8_t *p, uint32_t len)
{
    return len >= UDP_ETH_HELLO_LEN && memcmp(p, hello_magic, UDP_ETH_HELLO_LEN) == 0;
}

int udp_eth_hello(struct udp_eth *e, int fd, uint16_t node)
{
    uint8_t f[UDP_ETH_TXHDR + UDP_ETH_HELLO_LEN];
    memcpy(f, e->hdr[node], UDP_ETH_TXHDR);
    memcpy(f + UDP_ETH_TXHDR, hello_magic, UDP_ETH_HELLO_LEN);
    if (sendto(fd, f, sizeof f, MSG_DONTWAIT, (const struct sockaddr *)&e->to, sizeof e->to) < 0)
        return -errno;
    return 0;
}

uint32_t udp_eth_unpad(const uint8_t *p, uint32_t len)
{
    if (len == UDP_ETH_MIN - UDP_ETH_HDR && len >= MCP_WIRE_HDR &&
        mcp_get_le16(p) == MCP_WIRE_MAGIC) {
        uint32_t want = MCP_WIRE_HDR + mcp_get_le16(p + 20);
        if (want < len)
            return want;
    }
    return len;
}
