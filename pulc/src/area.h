/*
 * area.h — the message area: memory shared by every PULC process of the node (offsets only, no
 * pointers): a memfd psid creates, or the kernel module's area (PSK_MMAP_AREA) the first
 * attacher formats.  The header holds the NIC lock (a
 * process-shared robust mutex), the time of the last firmware pass and which clients are inside
 * a progress turn (psid's NIC thread leaves the NIC to them), psid's pid and the
 * cluster description the link needs, the area lock and the offsets of the port table,
 * message descriptors and fragments (marea.h).
 */
#ifndef PSPORT_PULC_AREA_H
#define PSPORT_PULC_AREA_H

#include <pthread.h>

struct mcp_image;
#include <stddef.h>
#include <stdint.h>

#include "fault.h"
#include "nodes.h"

#define PULC_AREA_MAGIC   0x41434c50u /* "PLCA" */
#define PULC_AREA_VERSION 7u
#define PULC_AREA_CTXS    64u /* NIC contexts (MCP_MAX_CONTEXTS) */

/* area.nic_napping: the NIC thread naps ... */
#define PULC_NAP_NONE  0u /* not napping (running the firmware, or waiting on the link) */
#define PULC_NAP_QUIET 1u /* clients poll, nothing waits to be sent: any nudge ends it */
#define PULC_NAP_IDLE                                                                              \
    2u /* clients poll, frames wait to be sent: only a sleeper's nudge ends it                     \
        */

/* Sizes of the area's tables (psid takes them from PSP_AREA_*; see marea.h for the tables). */
struct pulc_area_cfg {
    uint32_t ports;      /* port table entries (port numbers 1 .. ports-1) */
    uint32_t messages;   /* message descriptors */
    uint32_t fragments;  /* fragment buffers */
    uint32_t frag_size;  /* bytes per fragment: one NIC frame's payload */
    uint32_t rings;      /* local rings (lring.h), 0: none */
    uint32_t ring_bytes; /* bytes of each ring's data, a power of two */
};

/* Counters of the area, shown by psinfo -a. */
#define PULC_AREA_COUNTERS(X)                                                                      \
    X(rx_frames, "frames taken from the host queue")                                               \
    X(rx_duplicate, "fragments seen twice (after a repair) and skipped")                           \
    X(rx_orphan, "fragments of a message that was dropped (port closed, sender reset)")            \
    X(rx_noport, "messages for a port that is not open (sender told)")                             \
    X(rx_malformed, "frames with a bad PULC header (dropped)")                                     \
    X(rx_stalls, "drains stopped because messages or fragments ran out")                           \
    X(err_sent, "error notices sent back to senders")                                              \
    X(err_received, "error notices received for our ports")                                        \
    X(local_msgs, "messages delivered on this node without the NIC")                               \
    X(local_direct, "local messages copied once with process_vm_readv")                            \
    X(aborted, "incomplete messages dropped (sender restarted or died)")                           \
    X(reclaimed_ports, "ports of dead processes closed by psid")                                   \
    X(area_repairs, "area lock holders that died (area rebuilt)")                                  \
    X(rings_opened, "local rings opened (one per sending port and receiving port)")                \
    X(rings_none, "port pairs sending through the queue: no local ring was free")                  \
    X(ring_moved, "local ring messages moved into a port's queue (not taken at once)")

/* One NIC context's progress turn, on a cache line of its own (its client writes it). */
struct pulc_turn {
    uint64_t since_ns; /* atomic: mcp_now_ns() when the client's current turn began; 0: none */
    uint8_t pad[56];
};

struct pulc_area {
    uint32_t magic;
    uint32_t version;
    uint64_t size;    /* bytes of the whole area */
    int32_t psid_pid; /* the provider that created it */
    uint32_t pad0;
    uint64_t last_poll_ns;    /* atomic: mcp_now_ns() of the last firmware pass (any executor) */
    uint64_t lock_recoveries; /* atomic: NIC locks taken over from a dead holder */
    /* psid's NIC thread and the clients (pulc_nic_nudge): */
    uint32_t nic_nudge;   /* futex word: bumped to end the NIC thread's nap */
    uint32_t nic_napping; /* atomic: PULC_NAP_* (what the NIC thread is napping for) */
    /* atomic, per NIC context: its client's threads asleep until something arrives (the NIC
     * thread then takes frames as they come); psid zeroes a context's count at its detach */
    uint32_t net_waiters[PULC_AREA_CTXS];
    char link_kind[8];          /* the link psid opened ("udp", "eth") */
    char link_if[16];           /* its interface (eth) or "" */
    struct mcp_fault_cfg fault; /* faults psid's link injects; every executor's link does too */
    uint8_t pad1[64];
    pthread_mutex_t nic_lock; /* process-shared, robust: who holds it may run mcp_poll() */
    uint8_t pad2[64];
    pthread_mutex_t area_lock; /* process-shared, robust: guards everything below */
    uint8_t pad3[64];
    /* per NIC context: whether its client is inside a progress turn that runs the firmware
     * (pulc_area_turn).  psid's NIC thread leaves the NIC to such a client: a turn that moves
     * much data (receive, deliver, drain, post) can outlast PSP_NIC_IDLE_US.  psid clears a
     * context's entry at its detach. */
    struct pulc_turn turns[PULC_AREA_CTXS];
    struct pulc_area_cfg cfg;
    uint64_t off_ports, off_msgs, off_frags, off_frag_data; /* tables (marea.h) */
    uint64_t off_rings, off_ring_data;                      /* local rings (lring.h) */
    uint32_t ring_free;                                     /* free ring list head */
    uint32_t pad5;
    uint32_t msg_free, frag_free;   /* free list heads (PULC_NONE: empty) */
    uint32_t msgs_free, frags_free; /* their lengths */
    uint64_t seq;                   /* arrival order of messages */
    uint32_t next_port;             /* where PSP_ANYPORT starts looking */
    int32_t psid_ctx;               /* psid's own NIC context (error notices) */
    uint64_t rx_count;        /* host queue frames released (its low 32 bits follow hostq_tail) */
    uint32_t rx_head_applied; /* a repair found the unreleased frame applied: release it */
    uint32_t pad4;
#define PULC_AREA_COUNTER_FIELD(name, help) uint64_t name;
    PULC_AREA_COUNTERS(PULC_AREA_COUNTER_FIELD)
#undef PULC_AREA_COUNTER_FIELD
    struct psp_nodes nodes; /* the cluster description psid uses (clients open the link with it) */
};

/*
 * Create a fresh area in a new memfd (psid): header filled (nodes, link kind and interface,
 * fault injection copied), NIC and area locks initialised, the tables of cfg laid out and
 * every message and fragment on its free list.  Returns
 * the mapping (owned by the caller, release with pulc_area_unmap()) and the memfd in *fd, or
 * NULL with a message in err.  The memfd is sparse: untouched fragments cost no memory.
 */
struct pulc_area *pulc_area_create(const struct pulc_area_cfg *cfg, const struct psp_nodes *nodes,
                                   const char *link_kind, const char *link_if,
                                   const struct mcp_fault_cfg *fault, int *fd, char *err,
                                   size_t errlen);

/*
 * Format the kernel provider's message area in place (the first attacher does, see
 * PSK_ATTACH_FORMAT_AREA): mem (size bytes, mapped writable; zeroed memory, or what an
 * attacher that died while formatting left) gets a header with the nodes the module reaches
 * (PSK_IOC_NODES; clients refuse sends to others) and link_kind, the locks and the tables of
 * cfg, which must fit size.  Only the header and tables are written: fragment pages stay
 * unallocated until used.  Returns 0 or -EINVAL with a message in err.
 */
int pulc_area_format(void *mem, size_t size, const struct pulc_area_cfg *cfg,
                     const struct psp_nodes *nodes, const char *link_kind, char *err,
                     size_t errlen);

/* Check a mapped area of size bytes: magic, version, size.  0 or -EPROTO with a message. */
int pulc_area_check(const struct pulc_area *a, size_t size, char *err, size_t errlen);

/*
 * Map the area behind fd (a client) and check magic, version and size.  The caller keeps fd.
 * Returns the mapping or NULL with a message in err.
 */
struct pulc_area *pulc_area_map(int fd, char *err, size_t errlen);

/* Unmap an area from pulc_area_create() or pulc_area_map(). NULL is ignored. */
void pulc_area_unmap(struct pulc_area *a);

/*
 * Take the NIC lock of the image img.  A holder that died leaves the lock "owner dead": img
 * is repaired (mcp_image_repair), the lock marked consistent, counted in lock_recoveries and
 * logged.  Returns 0, or -ENOTRECOVERABLE (or another negative errno) when the lock cannot be
 * taken or the image not repaired.
 */
int pulc_nic_lock(struct pulc_area *a, struct mcp_image *img);

struct mcp_nic;

/*
 * One firmware pass of nic under the NIC lock: mcp_poll() now and the pass recorded in the
 * area.  Every executor (clients, psid's NIC thread) passes through here; who moves the
 * frames into ports and wakes their owners is pulc_drain().
 * Returns mcp_poll()'s work count or a negative errno when the lock cannot be taken.
 */
int pulc_nic_pass(struct pulc_area *a, struct mcp_nic *nic);

/* pulc_nic_pass(), but with try_only set returns 0 at once when another executor holds the
 * NIC lock (it is running the firmware; waiting for it would only serialise pollers). */
int pulc_nic_pass_try(struct pulc_area *a, struct mcp_nic *nic, int try_only);

/* The doorbell of a client that just posted sends: mcp_poll_send() if the NIC lock is free
 * (0 at once if not: its holder runs the firmware).  Does not count as a poll: nothing was
 * received.  Returns mcp_poll_send()'s count or the lock's error. */
int pulc_nic_send_try(struct pulc_area *a, struct mcp_nic *nic);

/* Release the NIC lock. */
void pulc_nic_unlock(struct pulc_area *a);

/* End psid's nap if it is in one (a futex wake, only then): frames wait to go out that no
 * client may transmit soon (ends a QUIET nap), or sleeper set: a client is about to sleep
 * until something arrives (ends any nap).  The caller made its reason visible before calling;
 * the NIC thread checks the reasons after announcing its nap (both sides fence), so one of the
 * two sees the other. */
void pulc_nic_nudge(struct pulc_area *a, int sleeper);

/* A client thread of context ctx is about to sleep until something arrives (+1) or woke (-1):
 * count it, and on +1 end psid's nap so that its NIC thread takes frames as they come. */
void pulc_net_waiting(struct pulc_area *a, int ctx, int delta);

/* Whether a client thread sleeps until something arrives (psid's NIC thread). */
int pulc_net_waiters(const struct pulc_area *a);

/* Context ctx's client begins a progress turn that runs the firmware at now_ns, or ends it
 * (now_ns 0).  Only the context's own client (or psid at its detach) calls this. */
static inline void pulc_area_turn(struct pulc_area *a, int ctx, uint64_t now_ns)
{
    if (ctx >= 0 && (unsigned)ctx < PULC_AREA_CTXS)
        __atomic_store_n(&a->turns[ctx].since_ns, now_ns, __ATOMIC_RELAXED);
}

/* Whether a client is inside a progress turn begun less than limit_ns before now_ns (one
 * stopped inside its turn counts no longer than that). */
int pulc_area_turn_running(const struct pulc_area *a, uint64_t now_ns, uint64_t limit_ns);

/* Record a firmware pass at now_ns (psid's NIC thread stays idle while passes are recent). */
static inline void pulc_area_polled(struct pulc_area *a, uint64_t now_ns)
{
    __atomic_store_n(&a->last_poll_ns, now_ns, __ATOMIC_RELAXED);
}

#endif
