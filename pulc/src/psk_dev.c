/*
 * psk_dev.c — attach through the psport kernel module's device (psk_dev.h).
 */
#include "psk_dev.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal.h"
#include "log.h"
#include "marea.h"
#include "mcp_env.h"
#include "mcp_host.h"
#include "proto.h"
#include "psport_abi.h"
#include "settings.h"

/* The areas this process attached through a device, for the waker (one HAL per process is
 * the rule; tests may attach a few). */
#define DEV_MAX_AREAS 4
static struct {
    struct pulc_area *area;
    int fd;
} dev_areas[DEV_MAX_AREAS];

const char *pulc_dev_path(void)
{
    const char *p = psp_setting_str("PSP_DEVICE");
    if (strcmp(p, "none") == 0)
        return NULL;
    if (*p)
        return p;
    return access(PSK_DEVICE_PATH, F_OK) == 0 ? PSK_DEVICE_PATH : NULL;
}

/* pulc_port_wake() found sleepers in a device area: wake every PSK_IOC_WAIT of the NIC. */
static void dev_waker(struct pulc_area *a)
{
    for (int i = 0; i < DEV_MAX_AREAS; i++)
        if (dev_areas[i].area == a) {
            (void)ioctl(dev_areas[i].fd, PSK_IOC_WAKE);
            return;
        }
}

static void areas_set(struct pulc_area *a, int fd)
{
    for (int i = 0; i < DEV_MAX_AREAS; i++)
        if (dev_areas[i].area == a || !dev_areas[i].area) {
            dev_areas[i].area = a;
            dev_areas[i].fd = fd;
            break;
        }
    pulc_area_set_waker(dev_waker);
}

static void areas_clear(struct pulc_area *a)
{
    for (int i = 0; i < DEV_MAX_AREAS; i++)
        if (dev_areas[i].area == a)
            dev_areas[i].area = NULL;
}

/* What a module parameter is set to (for messages), or "?". */
static void param_text(const char *name, char *out, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/module/psport/parameters/%s", name);
    snprintf(out, n, "?");
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)n, f)) {
        out[strcspn(out, "\n")] = '\0';
        if (!*out)
            snprintf(out, n, "(any)");
    }
    fclose(f);
}

/* The message of a refused ATTACH (errno e). */
static void attach_error(const struct pulc_hal *h, const char *path, int e, char *err,
                         size_t errlen)
{
    char v[256];
    switch (e) {
    case EACCES: {
        uid_t uid = geteuid();
        struct passwd *pw = getpwuid(uid);
        param_text("users", v, sizeof v);
        psp_set_err(err, errlen,
                    "user %s (uid %ld) may not use psport on node %u: the psport module (%s) "
                    "allows only root and uid(s) %s (module parameter users); ask the "
                    "administrator to add the user",
                    pw ? pw->pw_name : "?", (long)uid, h->info.node_id, path, v);
        break;
    }
    case EUSERS:
        psp_set_err(err, errlen,
                    "the psport module on node %u serves at most %u client processes (module "
                    "parameter max_clients) and all are in use: wait, or load it with a larger "
                    "max_clients",
                    h->info.node_id, h->info.max_clients);
        break;
    case EBUSY:
        psp_set_err(err, errlen,
                    "all %u NIC contexts of node %u are in use (or this process is attached "
                    "already): load the psport module with a larger contexts=",
                    h->info.contexts, h->info.node_id);
        break;
    case EPROTO:
        psp_set_err(err, errlen,
                    "the psport module speaks device ABI version %u, this library %u: rebuild "
                    "the client (or the module) from the same psport",
                    h->info.abi_version, PSK_ABI_VERSION);
        break;
    case ETIMEDOUT:
        psp_set_err(err, errlen,
                    "another process has been formatting the message area of %s for 30 s: "
                    "it hangs; kill it and try again",
                    path);
        break;
    default:
        psp_set_err(err, errlen, "ATTACH on %s failed: %s", path, strerror(e));
    }
}

/* Table sizes for the module's area of size bytes: PSP_AREA_PORTS and PSP_AREA_MESSAGES as
 * set, the rings within a quarter of it, and as many fragments as fit (at most
 * PSP_AREA_FRAGMENTS).  0 or -EINVAL. */
static int area_cfg(size_t size, uint32_t frag_size, struct pulc_area_cfg *cfg, char *err,
                    size_t errlen)
{
    uint64_t ports, msgs, frags, rings, ring_bytes;
    if (psp_setting_u64("PSP_AREA_PORTS", 2, 65536, &ports, err, errlen) ||
        psp_setting_u64("PSP_AREA_MESSAGES", 1, 1u << 24, &msgs, err, errlen) ||
        psp_setting_u64("PSP_AREA_FRAGMENTS", 1, 1u << 24, &frags, err, errlen) ||
        psp_setting_u64("PSP_AREA_RINGS", 0, 4096, &rings, err, errlen) ||
        psp_setting_u64("PSP_AREA_RING_BYTES", 1024, 1u << 24, &ring_bytes, err, errlen))
        return -EINVAL;
    /* The module's area has a fixed size (area_mb): its rings get at most a quarter of it,
     * smaller ones when PSP_AREA_RING_BYTES would take more, so the fragments keep the rest. */
    while (rings && ring_bytes > 1024 && rings * ring_bytes > size / 4)
        ring_bytes /= 2;
    cfg->rings = (uint32_t)rings;
    cfg->ring_bytes = (uint32_t)ring_bytes;
    cfg->ports = (uint32_t)ports;
    cfg->messages = (uint32_t)msgs;
    cfg->frag_size = frag_size;
    uint32_t lo = 0, hi = (uint32_t)frags;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        cfg->fragments = mid;
        if (pulc_area_bytes(cfg) <= size)
            lo = mid;
        else
            hi = mid - 1;
    }
    cfg->fragments = lo;
    if (!lo) {
        psp_set_err(err, errlen,
                    "the psport module's message area (%zu bytes) cannot hold PSP_AREA_PORTS=%u "
                    "ports and PSP_AREA_MESSAGES=%u message descriptors: load the module with a "
                    "larger area_mb, or lower them",
                    size, cfg->ports, cfg->messages);
        return -EINVAL;
    }
    return 0;
}

/* The nodes the module reaches (PSK_IOC_NODES) as a nodes table: 0 or -errno. */
static int dev_nodes(int fd, struct psp_nodes *out, char *err, size_t errlen)
{
    struct psk_nodes *n = calloc(1, sizeof *n);
    if (!n) {
        psp_set_err(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    if (ioctl(fd, PSK_IOC_NODES, n) != 0) {
        rc = -errno;
        psp_set_err(err, errlen, "NODES: %s", strerror(-rc));
    } else {
        memset(out, 0, sizeof *out);
        out->count = (uint16_t)(n->count < PSP_NODES_MAX ? n->count : PSP_NODES_MAX);
        for (unsigned i = 0; i < out->count; i++) {
            out->node[i].present = n->node[i].present;
            out->node[i].has_mac = n->node[i].present;
            memcpy(out->node[i].mac, n->node[i].mac, 6);
        }
    }
    free(n);
    return rc;
}

/* A drain's view of h (error and abort notices go out through our context). */
static void node_view(struct pulc_hal *h, struct pulc_node *n)
{
    memset(n, 0, sizeof *n);
    n->area = h->area;
    n->img = h->img;
    n->ctx = h->ctx;
    n->node_id = h->info.node_id;
    n->pid = (int32_t)getpid();
    n->settle = pulc_dev_settle;
    n->dev_fd = h->dev;
    n->ring_lock = &h->ring_lock;
}

/* Close pid's ports (and free the local messages it sent), then tell receivers of remote
 * messages it left half sent that they will not complete.  Returns the ports closed. */
static unsigned reclaim_pid(struct pulc_hal *h, int32_t pid)
{
    struct pulc_abort ab[64];
    unsigned nab = 0;
    unsigned closed = pulc_area_reclaim(h->area, pid, ab, 64, &nab);
    struct pulc_node n;
    node_view(h, &n);
    for (unsigned k = 0; k < nab; k++) {
        int rc = -EAGAIN;
        for (int tries = 0; tries < 1000 && rc == -EAGAIN; tries++) {
            if (pulc_area_lock(h->area) == 0) {
                rc = pulc_send_abort(&n, ab[k].dest, ab[k].src_port, ab[k].msg_id);
                pulc_area_unlock(h->area);
            }
            if (rc == -EAGAIN) { /* our send ring is full: let the firmware thread run */
                pulc_dev_kick(h);
                usleep(1000);
            }
        }
        if (rc)
            PSP_WARN("pid %ld: cannot tell port %u:%u that message %u is aborted", (long)pid,
                     ab[k].dest >> 16, ab[k].dest & 0xffffu, ab[k].msg_id);
    }
    pulc_dev_kick(h);
    return closed;
}

/*
 * The drainer: what psid's NIC thread does in the user-space provider.  It sleeps until the
 * module says the host queue stalled (frames nobody took for its stall time: no process of
 * the node is in libpulc) and then moves them into their ports with libpulc's own protocol
 * handlers (frames of protocols the process registered wait for its main thread, as psid
 * leaves them), sending the error notices they cause; about once a second it closes the ports
 * of processes that died without detaching.  Signals go to the other threads.
 */
static void *drainer_main(void *arg)
{
    struct pulc_hal *h = arg;
    struct pulc_node n;
    node_view(h, &n);
    n.keep_unknown = 1;
    n.builtin_only = 1;
    uint32_t seen = 0;
    for (;;) {
        struct psk_wait w = {seen, 1000, PSK_WAIT_STALL, 0};
        int rc = ioctl(h->dev, PSK_IOC_WAIT, &w) == 0 ? 0 : -errno;
        if (rc == -ECANCELED || rc == -EBADF)
            break;
        seen = w.seen;
        struct mcp_rx_desc d;
        if (rc == 0 && mcp_recv_peek(h->img, &d)) {
            if (pulc_drain(&n, UINT32_MAX) < 0)
                break;
            pulc_dev_kick(h);
        }
        uint64_t now = mcp_now_ns();
        if (now - __atomic_load_n(&h->reclaim_ns, __ATOMIC_RELAXED) >= 1000000000u) {
            __atomic_store_n(&h->reclaim_ns, now, __ATOMIC_RELAXED);
            pulc_dev_reclaim_dead(h);
        }
    }
    return NULL;
}

static int drainer_start(struct pulc_hal *h, char *err, size_t errlen)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&h->drainer, NULL, drainer_main, h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        psp_set_err(err, errlen, "cannot start libpulc's drainer thread: %s", strerror(rc));
        return -rc;
    }
    h->drainer_on = 1;
    h->drainer_pid = (int)getpid();
    return 0;
}

static void drainer_stop(struct pulc_hal *h)
{
    if (!h->drainer_on)
        return;
    h->drainer_on = 0;
    if (h->drainer_pid != (int)getpid())
        return; /* a forked child: the thread lives in the parent only */
    (void)ioctl(h->dev, PSK_IOC_CANCEL);
    pthread_join(h->drainer, NULL);
}

/* Whether pid holds an attached context of the NIC (the module records the owner's pid). */
static int pid_attached(struct mcp_image *img, int32_t pid)
{
    for (unsigned c = 0; c < img->cfg.contexts; c++) {
        struct mcp_context *x = mcp_ctx(img, c);
        if (MCP_LOAD_ACQ(&x->state) == MCP_CTX_ATTACHED &&
            __atomic_load_n(&x->owner, __ATOMIC_RELAXED) == (uint32_t)pid)
            return 1;
    }
    return 0;
}

unsigned pulc_dev_reclaim_dead(struct pulc_hal *h)
{
    struct pulc_area *a = h->area;
    unsigned closed = 0;
    for (uint32_t p = 1; p < a->cfg.ports; p++) {
        struct pulc_port *pt = pulc_port_at(a, p);
        /* a snapshot without the lock: pulc_area_reclaim checks again under it */
        int32_t pid = __atomic_load_n(&pt->owner_pid, __ATOMIC_RELAXED);
        if (__atomic_load_n(&pt->state, __ATOMIC_RELAXED) != PULC_PORT_OPEN || pid <= 0 ||
            pid_attached(h->img, pid))
            continue;
        unsigned n = reclaim_pid(h, pid);
        if (n)
            PSP_INFO("pid %ld exited without detaching: %u port(s) closed and their messages "
                     "freed",
                     (long)pid, n);
        closed += n;
    }
    return closed;
}

int pulc_dev_info(int fd, const char *path, struct psk_info *info, char *err, size_t errlen)
{
    if (ioctl(fd, PSK_IOC_INFO, info) == 0)
        return 0;
    int e = errno;
    /* Any other file refuses our ioctl the same way a module of another ABI (whose INFO has
     * another size) does: name both causes. */
    if (e == EPERM || e == ENOTTY)
        psp_set_err(err, errlen,
                    "%s refuses INFO (%s): it is not a psport device, or the psport module "
                    "loaded is of another device ABI version than this library's %u (load the "
                    "module of the same psport)",
                    path, strerror(e), PSK_ABI_VERSION);
    else
        psp_set_err(err, errlen, "%s is not a psport device (INFO: %s)", path, strerror(e));
    return -e;
}

int pulc_dev_attach(struct pulc_hal *h, const char *path, uint32_t abi, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENODEV || e == ENXIO)
            psp_set_err(err, errlen,
                        "no psport device at %s: load the module (modprobe psport ifname=... "
                        "node=... macs=...), or set PSP_DEVICE=none to use psid",
                        path);
        else if (e == EACCES)
            psp_set_err(err, errlen,
                        "cannot open %s: permission denied (the device node's mode; the "
                        "module creates it 0666)",
                        path);
        else
            psp_set_err(err, errlen, "cannot open %s: %s", path, strerror(e));
        return -e;
    }
    h->dev = fd;
    h->kernel = 1;
    pthread_mutex_init(&h->ring_lock, NULL);
    int rc = pulc_dev_info(fd, path, &h->info, err, errlen);
    if (rc)
        return rc;
    if (h->info.provider != PSK_PROVIDER_KERNEL) {
        psp_set_err(err, errlen, "%s reports provider %u, not the kernel module", path,
                    h->info.provider);
        return -EPROTO;
    }
    struct psk_attach at = {abi, -1, 0, 0};
    if (ioctl(fd, PSK_IOC_ATTACH, &at) != 0) {
        int e = errno;
        attach_error(h, path, e, err, errlen);
        return -e;
    }
    h->ctx = at.context;
    h->generation = at.generation;

    void *m = mmap(NULL, h->info.image_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   (off_t)PSK_MMAP_IMAGE);
    if (m == MAP_FAILED) {
        int e = errno;
        psp_set_err(err, errlen, "cannot map the NIC image of %s: %s", path, strerror(e));
        return -e;
    }
    h->img = m;
    h->img_size = h->info.image_size;
    uint32_t found = 0;
    if (mcp_image_check(h->img, h->img_size, &found)) {
        psp_set_err(err, errlen,
                    "the NIC image is firmware ABI version %u, this library speaks %u: rebuild "
                    "the client (or the module) from the same psport",
                    found, MCP_ABI_VERSION);
        return -EPROTO;
    }
    h->kick_head = mcp_ctx(h->img, (unsigned)h->ctx)->head;

    size_t asize = (size_t)h->info.area_size;
    m = mmap(NULL, asize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)PSK_MMAP_AREA);
    if (m == MAP_FAILED) {
        int e = errno;
        psp_set_err(err, errlen, "cannot map the message area of %s: %s", path, strerror(e));
        return -e;
    }
    if (at.flags & PSK_ATTACH_FORMAT_AREA) {
        struct pulc_area_cfg cfg;
        static struct psp_nodes nodes; /* 28 KiB: not on the stack (attach is single-threaded) */
        rc = area_cfg(asize, mcp_max_payload(h->img), &cfg, err, errlen);
        if (!rc)
            rc = dev_nodes(fd, &nodes, err, errlen);
        if (!rc)
            rc = pulc_area_format(m, asize, &cfg, &nodes, h->info.link_kind, err, errlen);
        if (rc) {
            munmap(m, asize);
            return rc; /* closing the device lets the next attacher format it */
        }
        if (ioctl(fd, PSK_IOC_AREA_READY) != 0) {
            int e = errno;
            munmap(m, asize);
            psp_set_err(err, errlen, "AREA_READY on %s: %s", path, strerror(e));
            return -e;
        }
        PSP_INFO("formatted the message area of %s: %u ports, %u messages, %u fragments of %u "
                 "bytes",
                 path, cfg.ports, cfg.messages, cfg.fragments, cfg.frag_size);
    } else if (pulc_area_check(m, asize, err, errlen)) {
        munmap(m, asize);
        return -EPROTO;
    }
    h->area = m;
    areas_set(h->area, fd);
    pulc_dev_reclaim_dead(h);
    h->reclaim_ns = mcp_now_ns();
    return drainer_start(h, err, errlen);
}

void pulc_dev_detach(struct pulc_hal *h)
{
    drainer_stop(h);
    if (h->area) {
        if (h->ctx >= 0 && h->img) {
            unsigned n = reclaim_pid(h, (int32_t)getpid());
            if (n)
                PSP_DEBUG_LOG("detach: %u port(s) closed", n);
        }
        areas_clear(h->area);
        munmap(h->area, (size_t)h->area->size);
    }
    if (h->img)
        munmap(h->img, h->img_size);
    if (h->dev >= 0)
        close(h->dev);
}

int pulc_dev_ring(struct pulc_hal *h)
{
    return ioctl(h->dev, PSK_IOC_KICK) == 0 ? 0 : -errno;
}

int pulc_dev_kick(struct pulc_hal *h)
{
    /* the main thread and the drainer both ring: a race rings once too often, never too
     * rarely (each rings after reading a head that includes its own posts) */
    uint32_t head = __atomic_load_n(&mcp_ctx(h->img, (unsigned)h->ctx)->head, __ATOMIC_ACQUIRE);
    if (head == __atomic_load_n(&h->kick_head, __ATOMIC_RELAXED))
        return 0;
    __atomic_store_n(&h->kick_head, head, __ATOMIC_RELAXED);
    int rc = pulc_dev_ring(h);
    return rc ? rc : 1;
}

int pulc_dev_wait(struct pulc_hal *h, uint32_t seen, uint32_t timeout_ms)
{
    struct psk_wait w = {seen, timeout_ms, 0, 0};
    return ioctl(h->dev, PSK_IOC_WAIT, &w) == 0 ? 0 : -errno;
}

int pulc_dev_settle(int dev_fd, uint32_t pos)
{
    struct psk_settle s = {pos, 0};
    return ioctl(dev_fd, PSK_IOC_SETTLE, &s) == 0 ? 0 : -errno;
}
