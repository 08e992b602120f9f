/* mcp_env.c — firmware configuration from the PSP_* settings table (user space). */
#include "mcp_env.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "mcp.h"
#include "settings.h"

uint64_t mcp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The mcp_config_autosize() bit of a setting that may say "auto", else 0. */
static unsigned auto_bit(const char *name)
{
    if (strcmp(name, "PSP_WINDOW") == 0)
        return MCP_AUTO_WINDOW;
    if (strcmp(name, "PSP_SEND_SLOTS") == 0)
        return MCP_AUTO_SEND_SLOTS;
    if (strcmp(name, "PSP_RECV_SLOTS") == 0)
        return MCP_AUTO_RECV_SLOTS;
    return 0;
}

int mcp_config_from_settings(struct mcp_config *c, uint16_t node, uint32_t max_frame, char *err,
                             size_t errlen)
{
    static const struct {
        const char *name;
        uint64_t min, max;
        size_t off;
        int width;
    } rows[] = {
        {"PSP_WINDOW", 1, MCP_MAX_WINDOW, offsetof(struct mcp_config, window), 16},
        {"PSP_FRAME_SIZE", 64, 65535 - MCP_WIRE_HDR, offsetof(struct mcp_config, slot_size), 32},
        {"PSP_CONTEXTS", 1, MCP_MAX_CONTEXTS, offsetof(struct mcp_config, contexts), 64},
        {"PSP_SEND_SLOTS", 1, 4096, offsetof(struct mcp_config, send_slots), 16},
        {"PSP_RECV_SLOTS", 2, 4096, offsetof(struct mcp_config, recv_slots), 16},
        {"PSP_HOSTQ_SLOTS", 1, 65535, offsetof(struct mcp_config, hostq_slots), 16},
        {"PSP_MAX_NODES", 2, 4096, offsetof(struct mcp_config, max_nodes), 16},
        {"PSP_RTO_US", 1, 10000000, offsetof(struct mcp_config, rto_us), 32},
        {"PSP_RTO_MAX_US", 1, 100000000, offsetof(struct mcp_config, rto_max_us), 32},
        {"PSP_ACK_DELAY_US", 0, 1000000, offsetof(struct mcp_config, ack_delay_us), 32},
        {"PSP_NACK_INTERVAL_US", 0, 10000000, offsetof(struct mcp_config, nack_interval_us), 32},
        {"PSP_NOBUF_BACKOFF_US", 0, 10000000, offsetof(struct mcp_config, nobuf_backoff_us), 32},
        {"PSP_PEER_TIMEOUT_MS", 1, 86400000, offsetof(struct mcp_config, peer_timeout_ms), 32},
    };
    const char *why;
    unsigned autosize = 0;

    mcp_config_default(c, node);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uint64_t v;
        unsigned bit = auto_bit(rows[i].name);
        if (bit && strcmp(psp_setting_str(rows[i].name), "auto") == 0) {
            autosize |= bit;
            continue;
        }
        if (psp_setting_u64(rows[i].name, rows[i].min, rows[i].max, &v, err, errlen)) {
            if (bit && err && strlen(err) + 1 < errlen)
                strncat(err, " (or auto)", errlen - strlen(err) - 1);
            return -EINVAL;
        }
        if (rows[i].width == 16)
            *(uint16_t *)((char *)c + rows[i].off) = (uint16_t)v;
        else
            *(uint32_t *)((char *)c + rows[i].off) = (uint32_t)v;
    }
    if (max_frame && c->slot_size + MCP_WIRE_HDR > max_frame) {
        if (max_frame < MCP_WIRE_HDR + 64) {
            snprintf(err, errlen, "link frames of %u bytes are too small for the firmware",
                     max_frame);
            return -EINVAL;
        }
        c->slot_size = max_frame - MCP_WIRE_HDR;
    }
    mcp_config_autosize(c, autosize);
    if (node >= c->max_nodes) {
        snprintf(err, errlen, "node id %u is not below PSP_MAX_NODES=%u", node, c->max_nodes);
        return -EINVAL;
    }
    if (mcp_config_check(c, &why)) {
        snprintf(err, errlen, "firmware configuration: %s", why);
        return -EINVAL;
    }
    if (getrandom(&c->seed, sizeof(c->seed), 0) != sizeof(c->seed))
        c->seed ^= mcp_now_ns();
    return 0;
}
