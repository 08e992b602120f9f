/*
 * psk_client.h — the client side of psid's socket protocol (kmod/psport_abi.h): connect, send
 * one request, read one reply with its file descriptors.
 */
#ifndef PSPORT_PULC_PSK_CLIENT_H
#define PSPORT_PULC_PSK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Largest number of descriptors a reply carries. */
#define PULC_PSK_MAX_FDS 4

/*
 * Connect to psid's socket at path.  Returns the socket (owned by the caller) or a negative
 * errno with a message in err: no socket / nobody listening gives "psid is not running ...".
 */
int pulc_psk_connect(const char *path, char *err, size_t errlen);

/* The longest reply payload a client takes (psid's task list runs 32 bytes a task). */
#define PULC_PSK_REPLY_MAX (64u << 20)

/*
 * One request: op with req (reqlen bytes) sent as ABI version abi; the reply payload is
 * copied to rep (at most replen bytes; *got gets the payload length if got != NULL, which may
 * be more than replen: then ask again with room for it) and up to
 * nfds received descriptors to fds (the caller owns them; unused entries are -1).  Returns 0,
 * the reply's negative errno with psid's text in err, or a negative errno of the transport.
 */
int pulc_psk_call(int sock, uint32_t op, uint32_t abi, const void *req, uint32_t reqlen, void *rep,
                  uint32_t replen, uint32_t *got, int *fds, int nfds, char *err, size_t errlen);

#endif
