// SPDX-License-Identifier: GPL-2.0
/*
 * mcp/crc32c.c compiled into the module: the frame checksum.
 * mcp/mcp_compat.h and mcp/mcp_types.h switch on __KERNEL__.
 */
#include "crc32c.c"
