// SPDX-License-Identifier: GPL-2.0
/*
 * mcp/mcp_wire.c compiled into the module: the frame format.
 * mcp/mcp_compat.h and mcp/mcp_types.h switch on __KERNEL__.
 */
#include "mcp_wire.c"
