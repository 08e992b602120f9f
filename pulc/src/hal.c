/*
 * hal.c — attach through psid or the kernel module (psk_dev.c), map, NIC lock, poll.
 */
#include "hal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "link.h"
#include "log.h"
#include "mcp_env.h"
#include "psk_client.h"
#include "psk_dev.h"
#include "settings.h"

static void hal_clear(struct pulc_hal *h)
{
    memset(h, 0, sizeof *h);
    h->sock = -1;
    h->dev = -1;
    h->ctx = -1;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* Maps now, in this process, the parts of the NIC image it will touch: the firmware's tables,
 * its own context's send frames, the receive frames and the host queue.  Why: a page's first
 * touch by a process is a fault (on this VM about 8 us), and a process touches thousands of
 * image pages as its first large messages pass, so those messages ran several times slower
 * than later ones (pulc/README.md, "Prefault").  Left out: the other contexts' send frames
 * (64 contexts of 2 MB with the defaults), which this process touches only when its firmware
 * pass sends for a neighbour on the same node.  MADV_POPULATE_WRITE (Linux 5.14) maps a range
 * in one call; the read of each page maps what it did not (an older kernel or C library) and,
 * under a hypervisor that fills its own page tables lazily, makes it do so now. */
static void prefault_image(struct pulc_hal *h)
{
    const struct mcp_image *img = h->img;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t frames = (size_t)img->cfg.send_slots * img->frame_stride;
    size_t own = (size_t)img->off_send_frames + (size_t)h->ctx * frames;
    size_t range[3][2] = {
        {0, img->off_send_frames}, {own, own + frames}, {img->off_recv_frames, h->img_size}};
    for (int i = 0; i < 3; i++) {
        size_t from = range[i][0] / pg * pg, to = (range[i][1] + pg - 1) / pg * pg;
        if (to > h->img_size)
            to = h->img_size;
        if (to <= from)
            continue;
        uint8_t *base = (uint8_t *)h->img;
#ifdef MADV_POPULATE_WRITE
        if (madvise(base + from, to - from, MADV_POPULATE_WRITE) != 0)
            PSP_DEBUG_LOG("prefault of NIC image bytes %zu-%zu: %s", from, to, strerror(errno));
#endif
        for (size_t o = from; o < to; o += pg) /* other processes write there: a relaxed load */
            (void)__atomic_load_n(base + o, __ATOMIC_RELAXED);
    }
}

int pulc_hal_attach(struct pulc_hal *h, const char *sock_path, uint32_t abi, char *err,
                    size_t errlen)
{
    hal_clear(h);
    int fds[4] = {-1, -1, -1, -1}; /* image, link, area, the link's receive ring (optional) */
    uint64_t spin_us, yield_us, prefault;
    if (psp_setting_u64("PSP_SPIN_US", 0, 10000000, &spin_us, err, errlen) ||
        psp_setting_u64("PSP_YIELD_US", 0, 10000000, &yield_us, err, errlen) ||
        psp_setting_u64("PSP_PREFAULT", 0, 1, &prefault, err, errlen))
        return -EINVAL;
    h->spin_ns = spin_us * 1000u;
    h->yield_ns = yield_us * 1000u;
    const char *dev = pulc_dev_path();
    if (dev) {
        int rc = pulc_dev_attach(h, dev, abi, err, errlen);
        if (rc)
            pulc_hal_detach(h);
        return rc;
    }
    int rc = pulc_psk_connect(sock_path, err, errlen);
    if (rc < 0)
        return rc;
    h->sock = rc;
    rc = pulc_psk_call(h->sock, PSK_OP_INFO, abi, NULL, 0, &h->info, sizeof h->info, NULL, NULL, 0,
                       err, errlen);
    if (rc)
        goto fail;
    struct psk_attach at = {abi, -1, 0, 0};
    rc = pulc_psk_call(h->sock, PSK_OP_ATTACH, abi, &at, sizeof at, &at, sizeof at, NULL, fds, 4,
                       err, errlen);
    if (rc)
        goto fail;
    h->ctx = at.context;
    h->generation = at.generation;
    if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
        psp_set_err(err, errlen, "psid's reply to ATTACH lacks its descriptors");
        rc = -EPROTO;
        goto fail;
    }

    struct stat st;
    if (fstat(fds[0], &st) != 0 || (uint64_t)st.st_size != h->info.image_size) {
        psp_set_err(err, errlen, "the NIC image psid passed is not the size INFO announced");
        rc = -EPROTO;
        goto fail;
    }
    h->img_size = (size_t)st.st_size;
    void *m = mmap(NULL, h->img_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (m == MAP_FAILED) {
        rc = -errno;
        psp_set_err(err, errlen, "cannot map the NIC image: %s", strerror(-rc));
        goto fail;
    }
    h->img = m;
    uint32_t found = 0;
    if (mcp_image_check(h->img, h->img_size, &found)) {
        psp_set_err(err, errlen,
                    "the NIC image is firmware ABI version %u, this library speaks %u: rebuild "
                    "the client against this psport",
                    found, MCP_ABI_VERSION);
        rc = -EPROTO;
        goto fail;
    }
    if (prefault)
        prefault_image(h);
    h->area = pulc_area_map(fds[2], err, errlen);
    if (!h->area) {
        rc = -EPROTO;
        goto fail;
    }

    struct mcp_link_params lp;
    memset(&lp, 0, sizeof lp);
    lp.node = h->info.node_id;
    lp.nodes = &h->area->nodes;
    lp.ifname = h->area->link_if[0] ? h->area->link_if : NULL;
    lp.fd = fds[1];
    lp.ring_fd = fds[3];
    lp.prefault = (int)prefault;
    /* psid's fault injection applies to every executor; a generator of its own per context. */
    lp.fault = h->area->fault;
    lp.fault.seed ^= 0x9e3779b97f4a7c15ull * (uint64_t)(h->ctx + 1);
    char lerr[256] = "";
    h->link = mcp_link_open(h->area->link_kind, &lp, lerr, sizeof lerr);
    if (!h->link) {
        psp_set_err(err, errlen, "cannot open the %s link on psid's socket: %s", h->area->link_kind,
                    lerr);
        rc = -EIO;
        goto fail;
    }
    fds[1] = -1; /* the link owns them */
    fds[3] = -1;
    close_fds(fds, 4);
    mcp_nic_init(&h->nic, h->img, h->link);
    return 0;

fail:
    close_fds(fds, 4);
    pulc_hal_detach(h);
    return rc;
}

void pulc_hal_detach(struct pulc_hal *h)
{
    if (h->kernel) {
        pulc_dev_detach(h);
        hal_clear(h);
        return;
    }
    if (h->ctx >= 0 && h->sock >= 0) {
        struct psk_attach at = {PSK_ABI_VERSION, h->ctx, h->generation, 0};
        char err[256];
        int fds[1];
        if (pulc_psk_call(h->sock, PSK_OP_DETACH, PSK_ABI_VERSION, &at, sizeof at, NULL, 0, NULL,
                          fds, 0, err, sizeof err))
            PSP_WARN("detach: %s", err);
    }
    if (h->link)
        lanai_close(h->link);
    if (h->img)
        munmap(h->img, h->img_size);
    pulc_area_unmap(h->area);
    if (h->sock >= 0)
        close(h->sock);
    hal_clear(h);
}

int pulc_hal_poll(struct pulc_hal *h)
{
    return pulc_hal_pass(h, 0);
}

int pulc_hal_pass(struct pulc_hal *h, int try_only)
{
    if (h->kernel)
        return pulc_dev_kick(h);
    return pulc_nic_pass_try(h->area, &h->nic, try_only);
}

int pulc_hal_kick(struct pulc_hal *h)
{
    return h->kernel ? pulc_dev_kick(h) : 0;
}

uint32_t pulc_hal_max_payload(const struct pulc_hal *h)
{
    return mcp_max_payload(h->img);
}

uint32_t pulc_hal_send_busy(struct pulc_hal *h)
{
    return mcp_send_busy(h->img, (unsigned)h->ctx);
}

int pulc_hal_send_error(struct pulc_hal *h, struct mcp_send_error *e)
{
    return mcp_errq_pop(h->img, (unsigned)h->ctx, e);
}

int pulc_hal_recv_peek(struct pulc_hal *h, struct mcp_rx_desc *d)
{
    return mcp_recv_peek(h->img, d);
}
