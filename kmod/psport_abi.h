/*
 * psport_abi.h — the one contract between the NIC side and the host side.
 *
 * A provider owns a NIC: its memory image (mcp/mcp_image.h) and its link.  Two providers
 * implement this ABI:
 *   - the Linux module (kmod/linux): misc device PSK_DEVICE_PATH (a second NIC of the same
 *     module is PSK_DEVICE_PATH "1", ...); mmap offset PSK_MMAP_IMAGE maps the image and
 *     PSK_MMAP_AREA the message area (memory the module allocates, zeroed; the first attacher
 *     formats it, see PSK_ATTACH_FORMAT_AREA); ioctls below.  The firmware runs in a kernel
 *     thread only: clients never run mcp_poll() (INFO has no PSK_INFO_HOST_POLL); they ring
 *     the doorbell (PSK_IOC_KICK) after posting sends and sleep in PSK_IOC_WAIT.  Moving
 *     frames from the host queue into ports stays the clients' job (there is no psid): when
 *     none does it for a while, PSK_WAIT_STALL wakes a client's drainer.  Writable mappings
 *     need an ATTACHed descriptor; read-only ones (psinfo) an allowed user.
 *   - psid (user space, the default where modules cannot be loaded): a UNIX stream socket
 *     (PSK_PSID_SOCKET, setting PSP_PSID_SOCKET) speaking the same operations as messages;
 *     the replies to ATTACH carry file descriptors (SCM_RIGHTS): the image memfd, the link
 *     socket and the message area memfd.  Clients may run the firmware themselves
 *     (host-driven executor) under the NIC lock.
 * Both check the caller (uid allowed, process limit, ABI version) before ATTACH succeeds:
 * that check is the protection boundary.
 *
 * Everything is little-endian with explicit sizes; usable from kernel and user space.
 */
#ifndef PSPORT_KMOD_ABI_H
#define PSPORT_KMOD_ABI_H

#ifdef __KERNEL__
#include <linux/ioctl.h>
#include <linux/types.h>
typedef __u8 psk_u8;
typedef __u16 psk_u16;
typedef __u32 psk_u32;
typedef __s32 psk_s32;
typedef __u64 psk_u64;
#else
#include <stdint.h>
#include <sys/ioctl.h>
typedef uint8_t psk_u8;
typedef uint16_t psk_u16;
typedef uint32_t psk_u32;
typedef int32_t psk_s32;
typedef uint64_t psk_u64;
#endif

#define PSK_ABI_VERSION 2u /* 2: INFO names the window and slot counts */
#define PSK_DEVICE_PATH "/dev/psport"
#define PSK_PSID_SOCKET "/run/psport/psid.sock"

/* mmap offsets of the device */
#define PSK_MMAP_IMAGE 0ull
#define PSK_MMAP_AREA  (1ull << 40) /* the message area (kernel provider), area_size bytes */

/* Provider kinds reported by INFO. */
#define PSK_PROVIDER_PSID   1u
#define PSK_PROVIDER_KERNEL 2u

/* INFO flags */
#define PSK_INFO_HOST_POLL 0x1u /* clients may run mcp_poll() themselves */
#define PSK_INFO_RX_RING   0x2u /* the link reads arrivals from a receive ring in memory */
#define PSK_INFO_UDP_ETH   0x4u /* the udp link sends frames under the MTU as Ethernet frames */

/* PSK_IOC_INFO: what the NIC is. */
struct psk_info {
    psk_u32 abi_version;     /* PSK_ABI_VERSION of the provider */
    psk_u32 mcp_abi_version; /* MCP_ABI_VERSION of the image */
    psk_u32 provider;        /* PSK_PROVIDER_* */
    psk_u32 flags;           /* PSK_INFO_* */
    psk_u64 image_size;      /* bytes to map at PSK_MMAP_IMAGE */
    psk_u64 area_size;       /* bytes of the message area (the module: to map at PSK_MMAP_AREA) */
    psk_u16 node_id;
    psk_u16 max_nodes;
    psk_u16 contexts;
    psk_u16 contexts_used;
    psk_u32 slot_size;
    psk_u32 max_clients; /* process limit */
    char link_kind[8];   /* "udp", "eth" */
    /* the firmware's counts in force (automatic ones as sized for the frame, mcp.h) */
    psk_u16 window; /* frames in flight to one peer */
    psk_u16 reserved;
    psk_u32 send_slots;  /* send slots per context */
    psk_u32 recv_slots;  /* receive slots of the NIC */
    psk_u32 hostq_slots; /* host queue entries */
};

/* PSK_IOC_ATTACH: take a context of the NIC for the calling process.  Errors: EACCES (user
 * not allowed), EUSERS (process limit), EBUSY (no free context, or this descriptor is attached
 * already), EPROTO (ABI version). */
struct psk_attach {
    psk_u32 abi_version; /* in: the client's PSK_ABI_VERSION */
    psk_s32 context;     /* out: context index */
    psk_u32 generation;  /* out: the context's generation */
    psk_u32 flags;       /* out: PSK_ATTACH_* (0 from psid) */
};

/* The caller is the first attacher of a fresh message area: it formats the area (pulc/src/
 * area.h), then says PSK_IOC_AREA_READY.  Other attachers wait inside ATTACH until then; if
 * the formatter closes its descriptor first, the next attacher formats instead. */
#define PSK_ATTACH_FORMAT_AREA 0x1u

/*
 * PSK_IOC_WAIT: sleep until the image's rx_event differs from `seen` (frames delivered to the
 * host queue, or a PSK_IOC_WAKE) or timeout_ms passes.  With PSK_WAIT_STALL instead: until
 * the host queue has held frames nobody took for the module's stall time (no process of the
 * node is in libpulc to move them into ports: the caller should drain); `seen` is then the
 * stall count seen last, and the current one comes back in it.  0, -ETIMEDOUT, -EINTR, or
 * -ECANCELED after PSK_IOC_CANCEL on the descriptor.
 */
struct psk_wait {
    psk_u32 seen;
    psk_u32 timeout_ms;
    psk_u32 flags; /* PSK_WAIT_* */
    psk_u32 reserved;
};
#define PSK_WAIT_STALL 0x1u

/* PSK_IOC_NODES (kernel provider): the cluster as the module knows it, node id -> MAC address
 * (module parameter macs).  A node is present when the module can reach it. */
#define PSK_NODES_MAX 1024
struct psk_node_entry {
    psk_u8 mac[6];
    psk_u8 present;
    psk_u8 reserved;
};
struct psk_nodes {
    psk_u32 count; /* highest present node id + 1 */
    psk_u32 reserved;
    struct psk_node_entry node[PSK_NODES_MAX];
};

/* PSK_IOC_SETTLE: mcp_recv_settle(image, pos) with the firmware held off (the NIC lock of the
 * kernel thread): finishes a host-queue release a killed consumer left half done.  pos is the
 * caller's count before that release; `position` returns mcp_recv_position(). */
struct psk_settle {
    psk_u32 pos;
    psk_u32 position;
};

#define PSK_IOC_MAGIC      'P'
#define PSK_IOC_INFO       _IOR(PSK_IOC_MAGIC, 1, struct psk_info)
#define PSK_IOC_ATTACH     _IOWR(PSK_IOC_MAGIC, 2, struct psk_attach)
#define PSK_IOC_WAIT       _IOWR(PSK_IOC_MAGIC, 3, struct psk_wait)
#define PSK_IOC_KICK       _IO(PSK_IOC_MAGIC, 4) /* doorbell: sends were posted, run the NIC */
#define PSK_IOC_WAKE       _IO(PSK_IOC_MAGIC, 5) /* bump rx_event, wake every PSK_IOC_WAIT */
#define PSK_IOC_AREA_READY _IO(PSK_IOC_MAGIC, 6) /* the formatter: the message area is ready */
#define PSK_IOC_SETTLE     _IOWR(PSK_IOC_MAGIC, 7, struct psk_settle)
#define PSK_IOC_NODES      _IOR(PSK_IOC_MAGIC, 8, struct psk_nodes)
#define PSK_IOC_CANCEL     _IO(PSK_IOC_MAGIC, 9) /* this descriptor's PSK_WAIT_STALL waits end */

/*
 * The psid provider's socket protocol: each request and each reply is one message starting
 * with struct psk_msg; `len` payload bytes follow (the struct of the operation).  Errors come
 * back as PSK_OP_ERROR with an errno in `status` and a text (NUL-terminated) as payload that
 * says what to do.
 */
#define PSK_MSG_MAGIC 0x4b535350u /* "PSSK" */

enum psk_op {
    PSK_OP_INFO = 1,   /* request: no payload; reply: struct psk_info */
    PSK_OP_ATTACH = 2, /* request: struct psk_attach; reply: struct psk_attach + fds */
    PSK_OP_DETACH = 3, /* request: struct psk_attach (context); reply: empty */
    PSK_OP_MAP = 4,    /* request: no payload; reply: struct psk_info + read-only
                          descriptors of the image and of the message area (no context:
                          psinfo's counters, contexts, ports and area usage) */
    PSK_OP_ERROR = 15,
};

struct psk_msg {
    psk_u32 magic;       /* PSK_MSG_MAGIC */
    psk_u32 abi_version; /* sender's PSK_ABI_VERSION */
    psk_u32 op;          /* enum psk_op */
    psk_s32 status;      /* 0 or a negative errno (replies) */
    psk_u32 len;         /* payload bytes that follow */
    psk_u32 reserved;
};

#endif
