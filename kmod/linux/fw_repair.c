// SPDX-License-Identifier: GPL-2.0
/*
 * mcp/mcp_repair.c compiled into the module: the image repair after a dead executor.
 * mcp/mcp_compat.h and mcp/mcp_types.h switch on __KERNEL__.
 */
#include "mcp_repair.c"
