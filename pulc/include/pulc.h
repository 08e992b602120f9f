/*
 * pulc.h — ParaStation User-Level Communication, the public API (PSP_*).
 *
 * This first slice: attach the process to the node's NIC through psid and detach again.
 * Ports and messages follow (pulc/README.md).  Functions return 0 or a negative errno;
 * PSP_StrError() says what went wrong and what to do.
 */
#ifndef PSPORT_PULC_H
#define PSPORT_PULC_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Attach this process to the NIC: connect to psid (PSP_PSID_SOCKET), check its ABI, take a
 * NIC context, map the NIC image and the message area and open the link.  Returns 0 (also
 * when already attached) or a negative errno: -ENOENT / -ECONNREFUSED psid is not running,
 * -EACCES user not allowed, -EPROTO ABI mismatch, -EUSERS / -EBUSY no room, others.
 */
int PSP_Init(void);

/* Detach from the NIC (sends still posted go out) and release everything PSP_Init() took. */
void PSP_Finalize(void);

/* This node's id, or -1 before PSP_Init(). */
int PSP_GetNodeID(void);

/*
 * Text for an error code returned by this library: for the last failure of PSP_Init() the
 * full message (psid's own text for a refusal), else strerror().  Static storage, valid until
 * the next call into the library.
 */
const char *PSP_StrError(int err);

#ifdef __cplusplus
}
#endif

#endif
