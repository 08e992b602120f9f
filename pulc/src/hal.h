/*
 * hal.h — the hardware abstraction of libpulc: the only code that touches NIC memory.
 *
 * Attach through one of the two providers of kmod/psport_abi.h.  psid: map the image and the
 * message area it passes, open the link on its socket, and run the firmware here
 * (host-driven executor) under the NIC lock.  The kernel module (psk_dev.h): map the device's
 * image and area; its kernel thread runs the firmware, this process rings the doorbell.
 */
#ifndef PSPORT_PULC_HAL_H
#define PSPORT_PULC_HAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "area.h"
#include "lanai.h"
#include "mcp.h"
#include "mcp_host.h"
#include "psport_abi.h"

struct pulc_hal {
    int sock;                  /* connection to psid (kept open: closing it detaches) */
    int dev;                   /* kernel provider: the device (kept open: closing it detaches) */
    int kernel;                /* 1: attached through the kernel module (no link, no mcp_poll) */
    uint32_t kick_head;        /* kernel provider: our ring's head when the doorbell last rang */
    uint64_t reclaim_ns;       /* kernel provider: last look for dead processes' ports */
    pthread_mutex_t ring_lock; /* kernel provider: one producer at a time on our send ring */
    pthread_t drainer;         /* kernel provider: the drainer thread (psk_dev.c) */
    int drainer_on;            /* it runs (started by the process with pid drainer_pid) */
    int drainer_pid;
    struct mcp_image *img; /* the NIC image, mapped read-write */
    size_t img_size;
    struct pulc_area *area;  /* the message area */
    struct lanai_link *link; /* our instance of psid's link socket */
    struct mcp_nic nic;      /* executor handle for mcp_poll() */
    int ctx;                 /* our context, -1 when detached */
    uint32_t generation;
    struct psk_info info; /* what psid said the NIC is */
    uint64_t spin_ns;     /* waiting: PSP_SPIN_US, read at attach */
    uint64_t yield_ns;    /* waiting: PSP_YIELD_US, read at attach */
};

/*
 * Attach h through the kernel module's device if pulc_dev_path() names one, else through
 * psid at sock_path, announcing ABI version abi (PSK_ABI_VERSION; tests pass others).  Returns
 * 0 or a negative errno with the message in err (the provider's reason when it refused).  On
 * failure h holds nothing.
 */
int pulc_hal_attach(struct pulc_hal *h, const char *sock_path, uint32_t abi, char *err,
                    size_t errlen);

/* Detach: tell psid, close the link, unmap, close the connection (kernel provider: close our
 * ports, unmap, close the device).  Safe on a detached h. */
void pulc_hal_detach(struct pulc_hal *h);

/* One firmware pass under the NIC lock; records the pass in the area. Returns mcp_poll()'s
 * work count or a negative errno when the lock cannot be taken.  Kernel provider: the
 * doorbell (pulc_hal_kick). */
int pulc_hal_poll(struct pulc_hal *h);

/* pulc_hal_poll(), but with try_only returns 0 at once when another executor holds the NIC
 * lock (psid provider). */
int pulc_hal_pass(struct pulc_hal *h, int try_only);

/* Kernel provider: ring the doorbell if our context posted sends since it last rang (1 rung,
 * 0 not needed, or a negative errno).  psid provider: 0 (its clients run the firmware). */
int pulc_hal_kick(struct pulc_hal *h);

/* Largest fragment payload. */
uint32_t pulc_hal_max_payload(const struct pulc_hal *h);

/* Send slots of our context not yet acknowledged (0: everything delivered or failed). */
uint32_t pulc_hal_send_busy(struct pulc_hal *h);

/* Take the oldest failed send of our context: 1 and *e filled, or 0. */
int pulc_hal_send_error(struct pulc_hal *h, struct mcp_send_error *e);

/*
 * The oldest frame in the node's host receive queue without taking it: 1 and *d filled, or
 * 0.  Frames are taken only by pulc_drain() (proto.h), which keeps the exactly-once
 * bookkeeping of the message area; this only tells whether a drain has work.
 */
int pulc_hal_recv_peek(struct pulc_hal *h, struct mcp_rx_desc *d);

/* The process's HAL, attached by PSP_Init() (ctx -1 before). */
struct pulc_hal *pulc_hal_self(void);

/* PSP_Init() with the ABI version to announce (PSK_ABI_VERSION; tests announce others). */
int pulc_init_abi(uint32_t abi);

#endif
