/*
 * mcp_env.h — firmware configuration from the PSP_* settings (user space only; the kernel
 * module configures the firmware from module parameters instead).
 */
#ifndef PSPORT_MCP_ENV_H
#define PSPORT_MCP_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "mcp_image.h"

/*
 * Fill c for node `node` from PSP_WINDOW, PSP_FRAME_SIZE, PSP_CONTEXTS, PSP_SEND_SLOTS,
 * PSP_RECV_SLOTS, PSP_HOSTQ_SLOTS, PSP_MAX_NODES, PSP_RTO_US, PSP_RTO_MAX_US,
 * PSP_ACK_DELAY_US, PSP_NACK_INTERVAL_US, PSP_NOBUF_BACKOFF_US, PSP_PEER_TIMEOUT_MS.
 * The frame size is capped so a frame fits max_frame (the link's limit; 0 = no limit); a
 * window or slot count set to "auto" is then sized for that frame size (mcp_config_autosize),
 * and the seed comes from getrandom().  Returns 0, or -EINVAL with the reason in err.
 */
int mcp_config_from_settings(struct mcp_config *c, uint16_t node, uint32_t max_frame, char *err,
                             size_t errlen);

/* Monotonic clock in nanoseconds (the clock user-space executors pass to mcp_poll). */
uint64_t mcp_now_ns(void);

#endif
