/* mcp_compat.h — what the firmware needs from its environment: errno values and memcpy,
 * from libc in user space and from the kernel in the Linux module. */
#ifndef PSPORT_MCP_COMPAT_H
#define PSPORT_MCP_COMPAT_H

#ifdef __KERNEL__
#include <linux/errno.h>
#include <linux/string.h>
#else
#include <errno.h>
#include <string.h>
#endif

#endif
