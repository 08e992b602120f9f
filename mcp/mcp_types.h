/* mcp_types.h — the integer types and offsetof the firmware's headers use: from libc in user
 * space, from the kernel in the Linux module (where <stdint.h> and <stddef.h> do not exist). */
#ifndef PSPORT_MCP_TYPES_H
#define PSPORT_MCP_TYPES_H

#ifdef __KERNEL__
#include <linux/stddef.h>
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#endif
