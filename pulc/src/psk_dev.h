/*
 * psk_dev.h — the HAL's kernel provider: attach through the psport module's device
 * (kmod/linux, PSK_DEVICE_PATH) instead of psid's socket.
 *
 * The module runs the firmware in a kernel thread, so a client never runs mcp_poll(): after
 * posting sends it rings the doorbell (PSK_IOC_KICK), and a waiting process sleeps in
 * PSK_IOC_WAIT (woken when the firmware delivered frames or another process queued for one
 * of its ports, pulc_area_set_waker).  The message area is the module's memory; the first
 * attacher formats it.  There is no psid to clean up after processes: a process closes its own
 * ports when it detaches, and the ports of processes that died without detaching (no attached
 * context of the NIC has their pid any more) are closed lazily by the next process that
 * attaches or sleeps (pulc_dev_reclaim_dead).
 */
#ifndef PSPORT_PULC_PSK_DEV_H
#define PSPORT_PULC_PSK_DEV_H

#include <stddef.h>
#include <stdint.h>

struct pulc_hal;
struct psk_info;

/*
 * The device to attach through: PSP_DEVICE if set (none: psid), else PSK_DEVICE_PATH when it
 * exists.  NULL means psid (PSP_PSID_SOCKET).
 */
const char *pulc_dev_path(void);

/*
 * PSK_IOC_INFO on fd (the device at path) into *info: 0, or a negative errno with the cause in
 * err (EPERM or ENOTTY: not a psport device, or a module of another device ABI).
 */
int pulc_dev_info(int fd, const char *path, struct psk_info *info, char *err, size_t errlen);

/*
 * Attach h through the device at path announcing ABI version abi: INFO, ATTACH (the module
 * checks the user and the process limit), map the image and the message area (formatting the
 * area when this process is the first), reclaim dead processes' ports.  Returns 0 or a
 * negative errno with the cause and the fix in err; on failure h holds nothing.
 */
int pulc_dev_attach(struct pulc_hal *h, const char *path, uint32_t abi, char *err, size_t errlen);

/* Close this process's ports, unmap, close the device (the module detaches the context). */
void pulc_dev_detach(struct pulc_hal *h);

/*
 * The doorbell: if this process posted sends since it last rang, PSK_IOC_KICK.  Returns 1 when
 * it rang, 0 when there was nothing to ring for, or a negative errno.
 */
int pulc_dev_kick(struct pulc_hal *h);

/* Ring the doorbell even though nothing was posted (the firmware has other work: an ACK asked
 * for now).  0 or a negative errno. */
int pulc_dev_ring(struct pulc_hal *h);

/*
 * Sleep until the image's rx_event differs from seen (frames delivered, or a PSK_IOC_WAKE) or
 * timeout_ms passes.  0, -ETIMEDOUT, -EINTR or another negative errno.
 */
int pulc_dev_wait(struct pulc_hal *h, uint32_t seen, uint32_t timeout_ms);

/*
 * Close the ports of processes that hold no attached context of the NIC (they exited or were
 * killed without detaching) as psid would (pulc_area_reclaim), telling receivers of messages
 * they left half sent.  Returns the ports closed.
 */
unsigned pulc_dev_reclaim_dead(struct pulc_hal *h);

/* pulc_node's settle for the kernel provider: mcp_recv_settle() through the device (the
 * firmware thread does not take the area's NIC lock).  0 or a negative errno. */
int pulc_dev_settle(int dev_fd, uint32_t pos);

#endif
