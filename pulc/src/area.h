/*
 * area.h — the message area: one memfd created by psid and mapped by every PULC process of
 * the node (offsets only, no pointers).  This first version holds the header: the NIC lock (a
 * process-shared robust mutex), the time of the last firmware pass, psid's pid and the
 * cluster description the link needs.  Ports, fragments and queues follow (pulc/README.md).
 */
#ifndef PSPORT_PULC_AREA_H
#define PSPORT_PULC_AREA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fault.h"
#include "nodes.h"

#define PULC_AREA_MAGIC   0x41434c50u /* "PLCA" */
#define PULC_AREA_VERSION 2u

struct pulc_area {
    uint32_t magic;
    uint32_t version;
    uint64_t size;    /* bytes of the whole area */
    int32_t psid_pid; /* the provider that created it */
    uint32_t pad0;
    uint64_t last_poll_ns;    /* atomic: mcp_now_ns() of the last firmware pass (any executor) */
    uint64_t lock_recoveries; /* atomic: NIC locks taken over from a dead holder */
    uint32_t sleepers;        /* atomic: processes asleep on the image's rx_event */
    uint32_t pad_sleepers;
    char link_kind[8];          /* the link psid opened ("udp", "eth") */
    char link_if[16];           /* its interface (eth) or "" */
    struct mcp_fault_cfg fault; /* faults psid's link injects; every executor's link does too */
    uint8_t pad1[64];
    pthread_mutex_t nic_lock; /* process-shared, robust: who holds it may run mcp_poll() */
    uint8_t pad2[64];
    struct psp_nodes nodes; /* the cluster description psid uses (clients open the link with it) */
};

/*
 * Create a fresh area in a new memfd (psid): header filled (nodes, link kind and interface,
 * fault injection copied), NIC lock initialised.  Returns
 * the mapping (owned by the caller, release with pulc_area_unmap()) and the memfd in *fd, or
 * NULL with a message in err.
 */
struct pulc_area *pulc_area_create(const struct psp_nodes *nodes, const char *link_kind,
                                   const char *link_if, const struct mcp_fault_cfg *fault, int *fd,
                                   char *err, size_t errlen);

/*
 * Map the area behind fd (a client) and check magic, version and size.  The caller keeps fd.
 * Returns the mapping or NULL with a message in err.
 */
struct pulc_area *pulc_area_map(int fd, char *err, size_t errlen);

/* Unmap an area from pulc_area_create() or pulc_area_map(). NULL is ignored. */
void pulc_area_unmap(struct pulc_area *a);

/*
 * Take the NIC lock.  A holder that died leaves the lock "owner dead": it is taken over,
 * marked consistent, counted in lock_recoveries and logged.  Returns 0, or -ENOTRECOVERABLE
 * (or another negative errno) when the lock cannot be taken.
 */
int pulc_nic_lock(struct pulc_area *a);

struct mcp_nic;

/*
 * One firmware pass of nic under the NIC lock: mcp_poll() now, the pass recorded in the
 * area, and, if it delivered frames while processes sleep in pulc_hal_wait_rx(), a futex wake
 * on the image's rx_event.  Every executor (clients, psid's NIC thread) passes through here.
 * Returns mcp_poll()'s work count or a negative errno when the lock cannot be taken.
 */
int pulc_nic_pass(struct pulc_area *a, struct mcp_nic *nic);

/* Release the NIC lock. */
void pulc_nic_unlock(struct pulc_area *a);

/* Record a firmware pass at now_ns (psid's NIC thread stays idle while passes are recent). */
static inline void pulc_area_polled(struct pulc_area *a, uint64_t now_ns)
{
    __atomic_store_n(&a->last_poll_ns, now_ns, __ATOMIC_RELAXED);
}

#endif
