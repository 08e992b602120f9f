/*
 * area.c — create, map and check the message area; the NIC lock.
 */
#include "area.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "marea.h"
#include "mcp.h"
#include "mcp_env.h"

static int robust_mutex_init(pthread_mutex_t *m)
{
    pthread_mutexattr_t at;
    int rc = pthread_mutexattr_init(&at);
    if (!rc)
        rc = pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    if (!rc)
        rc = pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    if (!rc)
        rc = pthread_mutex_init(m, &at);
    pthread_mutexattr_destroy(&at);
    return rc;
}

/* Header and tables of a fresh area at a (zeroed up to the fragment data): 0, or -EINVAL with a
 * message when cfg is impossible or does not fit size bytes. */
static int area_init(struct pulc_area *a, size_t size, const struct pulc_area_cfg *cfg,
                     const struct psp_nodes *nodes, const char *link_kind, const char *link_if,
                     const struct mcp_fault_cfg *fault, char *err, size_t errlen)
{
    a->magic = PULC_AREA_MAGIC;
    a->version = PULC_AREA_VERSION;
    a->size = size;
    a->psid_pid = (int32_t)getpid();
    snprintf(a->link_kind, sizeof a->link_kind, "%s", link_kind ? link_kind : "");
    snprintf(a->link_if, sizeof a->link_if, "%s", link_if ? link_if : "");
    if (nodes)
        a->nodes = *nodes;
    if (fault)
        a->fault = *fault;

    int rc = robust_mutex_init(&a->nic_lock);
    if (!rc)
        rc = robust_mutex_init(&a->area_lock);
    if (rc) {
        psp_set_err(err, errlen, "cannot initialise the NIC and area locks: %s", strerror(rc));
        return -EINVAL;
    }
    pulc_area_format_tables(a, cfg);
    return 0;
}

static int cfg_ok(const struct pulc_area_cfg *cfg, char *err, size_t errlen)
{
    if (cfg->ports < 2 || cfg->ports > 65536 || !cfg->messages || !cfg->fragments ||
        !cfg->frag_size) {
        psp_set_err(err, errlen,
                    "the message area needs 2..65536 ports and at least one message and "
                    "fragment (PSP_AREA_*)");
        return 0;
    }
    if (cfg->rings && (cfg->ring_bytes < 1024 || (cfg->ring_bytes & (cfg->ring_bytes - 1)))) {
        psp_set_err(err, errlen,
                    "local rings need a power of two of 1024 bytes or more "
                    "(PSP_AREA_RING_BYTES)");
        return 0;
    }
    return 1;
}

struct pulc_area *pulc_area_create(const struct pulc_area_cfg *cfg, const struct psp_nodes *nodes,
                                   const char *link_kind, const char *link_if,
                                   const struct mcp_fault_cfg *fault, int *fd, char *err,
                                   size_t errlen)
{
    if (!cfg_ok(cfg, err, errlen))
        return NULL;
    size_t size = pulc_area_bytes(cfg);
    int mfd = memfd_create("psport-area", MFD_CLOEXEC);
    if (mfd < 0) {
        psp_set_err(err, errlen, "cannot create the message area (memfd_create): %s",
                    strerror(errno));
        return NULL;
    }
    if (ftruncate(mfd, (off_t)size) != 0) {
        psp_set_err(err, errlen, "cannot size the message area to %zu bytes: %s", size,
                    strerror(errno));
        close(mfd);
        return NULL;
    }
    struct pulc_area *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (a == MAP_FAILED) {
        psp_set_err(err, errlen, "cannot map the message area: %s", strerror(errno));
        close(mfd);
        return NULL;
    }
    /* A fresh memfd reads as zeros: clearing the tables is enough, and the fragments' pages
     * stay unallocated until a message uses them (16384 fragments of a 32 KiB frame would
     * otherwise cost 512 MiB at start). */
    memset(a, 0, pulc_area_tables_bytes(cfg));
    if (area_init(a, size, cfg, nodes, link_kind, link_if, fault, err, errlen)) {
        munmap(a, size);
        close(mfd);
        return NULL;
    }
    *fd = mfd;
    return a;
}

int pulc_area_format(void *mem, size_t size, const struct pulc_area_cfg *cfg,
                     const struct psp_nodes *nodes, const char *link_kind, char *err, size_t errlen)
{
    if (!cfg_ok(cfg, err, errlen))
        return -EINVAL;
    if (pulc_area_bytes(cfg) > size) {
        psp_set_err(err, errlen, "the message area's tables need %zu bytes, it has %zu",
                    pulc_area_bytes(cfg), size);
        return -EINVAL;
    }
    /* Only the header and the tables: the fragments' pages stay untouched (unallocated). */
    memset(mem, 0, pulc_area_tables_bytes(cfg));
    return area_init(mem, size, cfg, nodes, link_kind, "", NULL, err, errlen);
}

int pulc_area_check(const struct pulc_area *a, size_t size, char *err, size_t errlen)
{
    if (a->magic != PULC_AREA_MAGIC || a->version != PULC_AREA_VERSION || a->size != size) {
        psp_set_err(err, errlen,
                    "the message area is version %u (magic 0x%08x), this library speaks "
                    "version %u: rebuild the client against this psport",
                    a->version, a->magic, PULC_AREA_VERSION);
        return -EPROTO;
    }
    return 0;
}

struct pulc_area *pulc_area_map(int fd, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        psp_set_err(err, errlen, "cannot stat the message area: %s", strerror(errno));
        return NULL;
    }
    if ((size_t)st.st_size < sizeof(struct pulc_area)) {
        psp_set_err(err, errlen,
                    "the message area has %lld bytes, this library needs %zu: psid and "
                    "libpulc come from different psport builds",
                    (long long)st.st_size, sizeof(struct pulc_area));
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    struct pulc_area *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (a == MAP_FAILED) {
        psp_set_err(err, errlen, "cannot map the message area: %s", strerror(errno));
        return NULL;
    }
    if (pulc_area_check(a, size, err, errlen)) {
        munmap(a, size);
        return NULL;
    }
    return a;
}

void pulc_area_unmap(struct pulc_area *a)
{
    if (a)
        munmap(a, a->size);
}

/* Lock result: a holder that died leaves EOWNERDEAD; repair the image and take it over. */
static int nic_lock_taken(struct pulc_area *a, struct mcp_image *img, int rc)
{
    if (rc == EOWNERDEAD) {
        /* The holder died inside a firmware pass: the image's journal says which step was
         * cut short; the repair settles it and rebuilds the derived state (mcp/PROTOCOL.md). */
        int r = mcp_image_repair(img);
        uint64_t n = __atomic_add_fetch(&a->lock_recoveries, 1, __ATOMIC_RELAXED);
        if (r) {
            PSP_ERROR("the NIC lock holder died and the NIC image cannot be repaired: %s",
                      strerror(-r));
            pthread_mutex_unlock(&a->nic_lock); /* not consistent: the lock stays unusable */
            return -ENOTRECOVERABLE;
        }
        PSP_WARN("the NIC lock holder died: image repaired, lock taken over (recovery %llu)",
                 (unsigned long long)n);
        rc = pthread_mutex_consistent(&a->nic_lock);
    }
    return -rc;
}

int pulc_nic_lock(struct pulc_area *a, struct mcp_image *img)
{
    return nic_lock_taken(a, img, pthread_mutex_lock(&a->nic_lock));
}

void pulc_nic_unlock(struct pulc_area *a)
{
    pthread_mutex_unlock(&a->nic_lock);
}

int pulc_nic_pass(struct pulc_area *a, struct mcp_nic *nic)
{
    return pulc_nic_pass_try(a, nic, 0);
}

int pulc_nic_pass_try(struct pulc_area *a, struct mcp_nic *nic, int try_only)
{
    int rc = try_only ? pthread_mutex_trylock(&a->nic_lock) : pthread_mutex_lock(&a->nic_lock);
    if (rc == EBUSY && try_only)
        return 0; /* another executor is running the firmware right now */
    rc = nic_lock_taken(a, nic->img, rc);
    if (rc)
        return rc;
    uint64_t now = mcp_now_ns();
    rc = mcp_poll(nic, now);
    pulc_area_polled(a, now);
    pulc_nic_unlock(a);
    return rc;
}

int pulc_nic_send_try(struct pulc_area *a, struct mcp_nic *nic)
{
    int rc = pthread_mutex_trylock(&a->nic_lock);
    if (rc == EBUSY)
        return 0;
    rc = nic_lock_taken(a, nic->img, rc);
    if (rc)
        return rc;
    rc = mcp_poll_send(nic, mcp_now_ns());
    pulc_nic_unlock(a);
    return rc;
}

_Static_assert(PULC_AREA_CTXS == MCP_MAX_CONTEXTS, "one waiter count per NIC context");

void pulc_nic_nudge(struct pulc_area *a, int sleeper)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* our reason before the look at nic_napping */
    uint32_t nap = __atomic_load_n(&a->nic_napping, __ATOMIC_SEQ_CST);
    if (nap == PULC_NAP_NONE || (nap == PULC_NAP_IDLE && !sleeper))
        return;
    if (!__atomic_compare_exchange_n(&a->nic_napping, &nap, PULC_NAP_NONE, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return; /* somebody else ended it, or it changed: the NIC thread looks again anyway */
    __atomic_add_fetch(&a->nic_nudge, 1u, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &a->nic_nudge, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void pulc_net_waiting(struct pulc_area *a, int ctx, int delta)
{
    if (ctx < 0 || (unsigned)ctx >= PULC_AREA_CTXS)
        return;
    __atomic_add_fetch(&a->net_waiters[ctx], (uint32_t)delta, __ATOMIC_SEQ_CST);
    if (delta > 0)
        pulc_nic_nudge(a, 1);
}

int pulc_net_waiters(const struct pulc_area *a)
{
    for (unsigned c = 0; c < PULC_AREA_CTXS; c++)
        if (__atomic_load_n(&a->net_waiters[c], __ATOMIC_SEQ_CST))
            return 1;
    return 0;
}

int pulc_area_turn_running(const struct pulc_area *a, uint64_t now_ns, uint64_t limit_ns)
{
    for (unsigned c = 0; c < PULC_AREA_CTXS; c++) {
        uint64_t since = __atomic_load_n(&a->turns[c].since_ns, __ATOMIC_RELAXED);
        if (since && (since >= now_ns || now_ns - since < limit_ns))
            return 1;
    }
    return 0;
}
