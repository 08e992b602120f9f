/*
 * psk_inject — send malformed psport frames (EtherType 0x88B5) out of an interface, for the
 * kernel module test (test/kmod/guest-init): the receiving NIC must count and drop every one
 * and go on working.
 *
 *   psk_inject IFNAME DST_MAC SRC_NODE DST_NODE [ROUNDS] [SEED]
 *
 * Each round sends one frame of every kind below; then SEED-driven random frames (random
 * length and bytes, and valid headers with random fields).  The last line printed says what
 * the receiver's counters must at least grow by:
 *   expect malformed N crc_errors N wrong_dest N stale N
 * Needs CAP_NET_RAW.  Exit 0, 1 on a send failure, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mcp_wire.h"

#define ETHERTYPE_PSPORT 0x88B5
#define MAX_FRAME        9000

static int fd = -1;
static struct sockaddr_ll to;
static uint8_t src_mac[6], dst_mac[6];
static uint64_t rng;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Send payload (len bytes after the Ethernet header); exits on failure. */
static void send_frame(const uint8_t *payload, uint32_t len)
{
    static uint8_t f[14 + MAX_FRAME];
    memcpy(f, dst_mac, 6);
    memcpy(f + 6, src_mac, 6);
    f[12] = ETHERTYPE_PSPORT >> 8;
    f[13] = ETHERTYPE_PSPORT & 0xff;
    memcpy(f + 14, payload, len);
    if (sendto(fd, f, 14 + len, 0, (struct sockaddr *)&to, sizeof to) != (ssize_t)(14 + len)) {
        fprintf(stderr, "psk_inject: send of %u bytes: %s\n", len, strerror(errno));
        exit(1);
    }
    usleep(200); /* do not overrun the receiver's queue: every frame must be looked at */
}

/* A well-formed frame header of type t from src to dst with a payload of plen bytes. */
static uint32_t frame(uint8_t *b, uint8_t t, uint16_t src, uint16_t dst, uint32_t plen)
{
    struct mcp_wire_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = MCP_WIRE_MAGIC;
    h.version = MCP_WIRE_VERSION;
    h.type = t;
    h.src_node = src;
    h.dst_node = dst;
    h.src_cid = 0x12345600u | (rnd() & 0xff);
    h.dst_cid = 0xdead0000u | (rnd() & 0xffff);
    h.seq = (uint8_t)rnd();
    h.len = (uint16_t)plen;
    mcp_wire_put(b, &h);
    for (uint32_t k = 0; k < plen; k++)
        b[MCP_WIRE_HDR + k] = (uint8_t)rnd();
    mcp_wire_seal(b, MCP_WIRE_HDR + plen);
    return MCP_WIRE_HDR + plen;
}

static int parse_mac(const char *s, uint8_t m[6])
{
    unsigned v[6];
    if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
        return -1;
    for (int i = 0; i < 6; i++)
        m[i] = (uint8_t)v[i];
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7 || parse_mac(argv[2], dst_mac)) {
        fprintf(stderr, "usage: psk_inject IFNAME DST_MAC SRC_NODE DST_NODE [ROUNDS] [SEED]\n");
        return 2;
    }
    uint16_t src = (uint16_t)atoi(argv[3]), dst = (uint16_t)atoi(argv[4]);
    int rounds = argc > 5 ? atoi(argv[5]) : 20;
    rng = argc > 6 ? strtoull(argv[6], NULL, 0) : 1;
    rng = rng ? rng : 1;

    fd = socket(AF_PACKET, SOCK_RAW, htons(ETHERTYPE_PSPORT));
    if (fd < 0) {
        fprintf(stderr, "psk_inject: packet socket: %s (needs CAP_NET_RAW)\n", strerror(errno));
        return 1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", argv[1]);
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0) {
        fprintf(stderr, "psk_inject: interface %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    memcpy(src_mac, ifr.ifr_hwaddr.sa_data, 6);
    memset(&to, 0, sizeof to);
    to.sll_family = AF_PACKET;
    to.sll_protocol = htons(ETHERTYPE_PSPORT);
    to.sll_ifindex = (int)if_nametoindex(argv[1]);
    to.sll_halen = 6;
    memcpy(to.sll_addr, dst_mac, 6);

    static uint8_t b[MAX_FRAME];
    unsigned malformed = 0, crc = 0, wrong = 0, stale = 0, sent = 0;
    for (int r = 0; r < rounds; r++) {
        uint32_t n;
        /* shorter than a header (may arrive padded to the Ethernet minimum) */
        n = rnd() % MCP_WIRE_HDR;
        for (uint32_t k = 0; k < n; k++)
            b[k] = (uint8_t)rnd();
        send_frame(b, n ? n : 1);
        malformed++;
        /* wrong magic */
        n = frame(b, MCP_FT_DATA, src, dst, 100);
        b[0] ^= 0x5a;
        mcp_wire_seal(b, n);
        send_frame(b, n);
        malformed++;
        /* wrong version */
        n = frame(b, MCP_FT_ACK, src, dst, 0);
        b[2] = 9;
        mcp_wire_seal(b, n);
        send_frame(b, n);
        malformed++;
        /* unknown type */
        n = frame(b, MCP_FT_ACK, src, dst, 0);
        b[3] = 42;
        mcp_wire_seal(b, n);
        send_frame(b, n);
        malformed++;
        /* length field disagrees with the frame */
        n = frame(b, MCP_FT_DATA, src, dst, 500);
        mcp_put_le16(b + 20, 400);
        mcp_wire_seal(b, n);
        send_frame(b, n);
        malformed++;
        /* control frame with a payload */
        n = frame(b, MCP_FT_NACK, src, dst, 64);
        send_frame(b, n);
        malformed++;
        /* longer than any receive slot (slots are 4096 bytes of payload) */
        n = frame(b, MCP_FT_DATA, src, dst, 8000);
        mcp_put_le16(b + 20, 8000);
        mcp_wire_seal(b, n);
        send_frame(b, n);
        malformed++;
        /* bad CRC */
        n = frame(b, MCP_FT_DATA, src, dst, 1000);
        b[MCP_WIRE_HDR + 10] ^= 1;
        send_frame(b, n);
        crc++;
        /* addressed to a node that is not the receiver, and from the receiver itself */
        n = frame(b, MCP_FT_DATA, src, (uint16_t)(dst + 77), 10);
        send_frame(b, n);
        n = frame(b, MCP_FT_DATA, dst, dst, 10);
        send_frame(b, n);
        wrong += 2;
        /* DATA, ACK and NACK on a connection the receiver does not know */
        n = frame(b, MCP_FT_DATA, src, dst, 200);
        send_frame(b, n);
        n = frame(b, MCP_FT_ACK, src, dst, 0);
        b[18] = MCP_FLAG_ACK;
        mcp_wire_seal(b, n);
        send_frame(b, n);
        n = frame(b, MCP_FT_RST, src, dst, 0);
        send_frame(b, n);
        stale += 3;
        sent += 13;
        /* random bytes of random length, then valid headers with random fields (counted by
         * whatever the receiver makes of them: not in the expectation) */
        for (int k = 0; k < 8; k++) {
            n = 1 + rnd() % 2000;
            for (uint32_t i = 0; i < n; i++)
                b[i] = (uint8_t)rnd();
            send_frame(b, n);
            sent++;
        }
    }
    printf("psk_inject: %u frames sent on %s\n", sent, argv[1]);
    printf("expect malformed %u crc_errors %u wrong_dest %u stale %u\n", malformed, crc, wrong,
           stale);
    close(fd);
    return 0;
}
