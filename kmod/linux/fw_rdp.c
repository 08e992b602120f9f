// SPDX-License-Identifier: GPL-2.0
/*
 * mcp/mcp_rdp.c compiled into the module: the RDP main loop (mcp_poll).
 * mcp/mcp_compat.h and mcp/mcp_types.h switch on __KERNEL__.
 */
#include "mcp_rdp.c"
