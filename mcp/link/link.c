/*
 * link.c — choosing a link by name, and what all socket links answer alike.
 */
#include "link.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "link_sock.h"
#include "settings.h"

struct lanai_link *mcp_link_open(const char *kind, const struct mcp_link_params *p, char *err,
                                 size_t errlen)
{
    if (!kind || !kind[0] || strcmp(kind, "udp") == 0)
        return mcp_link_udp_open(p, err, errlen);
    if (strcmp(kind, "eth") == 0)
        return mcp_link_eth_open(p, err, errlen);
    if (err && errlen) {
        if (strcmp(kind, "sim") == 0)
            snprintf(err, errlen,
                     "link kind 'sim' exists only inside tests (mcp_sim_link_open): set "
                     "PSP_LINK=udp or PSP_LINK=eth");
        else
            snprintf(err, errlen, "unknown link kind '%s': PSP_LINK accepts udp or eth", kind);
    }
    return NULL;
}

static int is_sock_link(const struct lanai_link *link)
{
    return link && link->kind && (strcmp(link->kind, "udp") == 0 || strcmp(link->kind, "eth") == 0);
}

int mcp_link_fd(struct lanai_link *link)
{
    if (!is_sock_link(link))
        return -1;
    return ((struct mcp_sock_link *)link)->fd;
}

int mcp_link_ring_fd(struct lanai_link *link)
{
    if (!link || !link->kind || strcmp(link->kind, "udp") != 0)
        return -1;
    return mcp_link_udp_ring_fd(link);
}

int mcp_link_has_ring(struct lanai_link *link)
{
    if (!is_sock_link(link))
        return 0;
    if (strcmp(link->kind, "eth") == 0)
        return mcp_link_eth_has_ring(link);
    return mcp_link_udp_ring_fd(link) >= 0;
}

int mcp_link_udp_eth(struct lanai_link *link)
{
    return is_sock_link(link) && strcmp(link->kind, "udp") == 0 && mcp_link_udp_eth_on(link);
}

int mcp_link_stats(struct lanai_link *link, struct mcp_link_stats *s)
{
    if (!is_sock_link(link) || !s)
        return -EINVAL;
    *s = ((struct mcp_sock_link *)link)->st;
    return 0;
}

int mcp_fault_from_settings(struct mcp_fault_cfg *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->reorder_max = 1;
    int rc;
    if ((rc = psp_setting_prob("PSP_LINK_LOSS", &f->loss, err, errlen)) != 0)
        return rc;
    if ((rc = psp_setting_prob("PSP_LINK_DUP", &f->dup, err, errlen)) != 0)
        return rc;
    if ((rc = psp_setting_prob("PSP_LINK_CORRUPT", &f->corrupt, err, errlen)) != 0)
        return rc;
    if ((rc = psp_setting_u64("PSP_LINK_SEED", 0, UINT64_MAX, &f->seed, err, errlen)) != 0)
        return rc;
    return 0;
}
