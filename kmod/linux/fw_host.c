// SPDX-License-Identifier: GPL-2.0
/*
 * mcp/mcp_host.c compiled into the module: the host side of the image (contexts, host queue).
 * mcp/mcp_compat.h and mcp/mcp_types.h switch on __KERNEL__.
 */
#include "mcp_host.c"
